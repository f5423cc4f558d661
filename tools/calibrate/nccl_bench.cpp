// NCCL collectives on every visible GPU of this process (ncclCommInitAll), nccl-tests style:
// S is the whole buffer (all-gather and reduce-scatter: per-rank count × ranks), float data,
// out-of-place; the time is the host wall time of a launch on all ranks until every stream has
// finished, averaged over the repeats after warm-up; algbw = S/t, busbw = algbw × nccl-tests'
// factor (2(n−1)/n all-reduce; (n−1)/n all-gather, reduce-scatter, all-to-all; 1 send/recv).
#include <nccl.h>

#include <chrono>

#include "harness.hpp"

namespace calib {
namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw CudaError(std::string(what) + ": " + ncclGetErrorString(r));
}

double busbw_factor(const std::string& op, int n) {
  const double r = static_cast<double>(n);
  if (op == "all_reduce") return 2 * (r - 1) / r;
  if (op == "send_recv") return 1;
  return (r - 1) / r;
}

}  // namespace

void bench_nccl(const Options& o, Json& out, std::vector<std::string>& notes) {
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (n == 1) notes.push_back("nccl: one GPU visible; collectives on one rank are local copies");
  std::vector<int> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  nccl_check(ncclCommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll");
  size_t free_b = 0, total_b = 0;
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  const size_t max = std::min<size_t>(static_cast<size_t>(o.max_bytes), free_b / 4);
  std::vector<void*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    const auto i = static_cast<size_t>(d);
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaMalloc(&send[i], max), "cudaMalloc");
    check(cudaMalloc(&recv[i], max), "cudaMalloc");
    check(cudaStreamCreate(&streams[i]), "cudaStreamCreate");
    launch_fill(send[i], max, streams[i]);
  }
  Json rows = out.value("nccl", Json::array());
  const std::vector<std::string> ops{"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                     "send_recv"};
  for (const auto& op : ops) {
    if (op == "send_recv" && n < 2) continue;
    for (size_t bytes = 1024; bytes <= max; bytes *= 4) {
      const size_t count = bytes / sizeof(float);  // whole buffer, in floats
      const size_t per_rank = count / static_cast<size_t>(n);
      if (per_rank == 0) continue;
      const auto launch = [&] {
        nccl_check(ncclGroupStart(), "ncclGroupStart");
        for (int d = 0; d < n; ++d) {
          const auto i = static_cast<size_t>(d);
          auto* c = comms[i];
          auto* s = streams[i];
          if (op == "all_reduce") {
            nccl_check(ncclAllReduce(send[i], recv[i], count, ncclFloat, ncclSum, c, s),
                       op.c_str());
          } else if (op == "all_gather") {
            nccl_check(ncclAllGather(send[i], recv[i], per_rank, ncclFloat, c, s), op.c_str());
          } else if (op == "reduce_scatter") {
            nccl_check(ncclReduceScatter(send[i], recv[i], per_rank, ncclFloat, ncclSum, c, s),
                       op.c_str());
          } else if (op == "all_to_all") {
            for (int peer = 0; peer < n; ++peer) {
              const size_t off = static_cast<size_t>(peer) * per_rank * sizeof(float);
              nccl_check(
                  ncclSend(static_cast<char*>(send[i]) + off, per_rank, ncclFloat, peer, c, s),
                  "ncclSend");
              nccl_check(
                  ncclRecv(static_cast<char*>(recv[i]) + off, per_rank, ncclFloat, peer, c, s),
                  "ncclRecv");
            }
          } else {
            nccl_check(ncclSend(send[i], count, ncclFloat, (d + 1) % n, c, s), "ncclSend");
            nccl_check(ncclRecv(recv[i], count, ncclFloat, (d + n - 1) % n, c, s), "ncclRecv");
          }
        }
        nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      };
      const auto sync = [&] {
        for (int d = 0; d < n; ++d) {
          check(cudaSetDevice(d), "cudaSetDevice");
          check(cudaStreamSynchronize(streams[static_cast<size_t>(d)]), "cudaStreamSynchronize");
        }
      };
      for (int i = 0; i < o.warmup; ++i) launch();
      sync();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.repeats; ++i) launch();
      sync();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          o.repeats;
      const double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
      rows.push_back({{"op", op},
                      {"ranks", n},
                      {"nodes", 1},
                      {"bytes", static_cast<double>(bytes)},
                      {"time_us", us},
                      {"algbw_GBps", algbw},
                      {"busbw_GBps", algbw * busbw_factor(op, n)}});
    }
  }
  out["nccl"] = rows;
  for (int d = 0; d < n; ++d) {
    const auto i = static_cast<size_t>(d);
    cudaSetDevice(d);
    cudaFree(send[i]);
    cudaFree(recv[i]);
    cudaStreamDestroy(streams[i]);
    ncclCommDestroy(comms[i]);
  }
}

}  // namespace calib
