// A GEMM beside a kernel that holds SMs, as an NCCL collective's CTAs hold them beside the GEMMs
// a training step overlaps with it (../shared/reference/software-stacks.md §2): the GEMM alone,
// then with `held` SMs taken by a spinning kernel launched first (one block per SM, each asking
// for the SM's whole shared memory, so no GEMM block shares its SM), for GEMMs cuBLASLt planned
// for the whole GPU and for the SMs left (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, Transformer
// Engine's SM margin). One GPU is enough: what is measured is the GEMM's side, the SM share and
// the grid's rounds, which meshsim's kernel model prices (compute/kernel_time.hpp, SmsTaken).
#include <chrono>
#include <thread>

#include "lt_gemm.hpp"

namespace calib {
namespace {

struct GemmDims {
  long m, n, k;
};

}  // namespace

void bench_interference(const Options& o, Json& out, std::vector<std::string>& notes) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int sms = prop.multiProcessorCount;
  // One full wave of 128×256 tiles on this GPU (the forum case), a layer GEMM at 4K tokens, and
  // large squares.
  const long wave_n = 256 * ((sms + 11) / 12);
  const std::vector<GemmDims> shapes = {{128 * 12, wave_n, 8192},
                                        {4096, o.hidden, o.hidden},
                                        {4096, 2 * o.ffn / 8, o.hidden},
                                        {8192, 8192, 8192},
                                        {16384, 16384, 8192}};
  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto& s : shapes) {
    max_a = std::max(max_a, static_cast<size_t>(s.m * s.k));
    max_b = std::max(max_b, static_cast<size_t>(s.k * s.n));
    max_c = std::max(max_c, static_cast<size_t>(s.m * s.n));
  }
  cudaStream_t gs, hs;
  check(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&hs, cudaStreamNonBlocking), "cudaStreamCreate");
  const GemmBuffers buf(max_a, max_b, max_c, gs);
  const size_t ws_bytes = GemmBuffers::kWorkspaceBytes;
  int* started = nullptr;  // host-mapped: how many holding blocks are resident
  check(cudaHostAlloc(reinterpret_cast<void**>(&started), sizeof(int), cudaHostAllocMapped),
        "cudaHostAlloc");
  int* started_dev = nullptr;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&started_dev), started, 0),
        "cudaHostGetDevicePointer");
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  cublasLtHandle_t lt;
  lt_check(cublasLtCreate(&lt), "cublasLtCreate");
  int clock_khz = 0;  // the spinning blocks count clock64() cycles at up to this rate
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock rate");
  const double clock_hz = static_cast<double>(clock_khz) * 1e3;
  Json rows = out.value("interference", Json::array());

  // The GEMM's time with `held` SMs spinning beside it for at least `hold_us`; -1 when the
  // holder ended before the GEMM did (then the caller holds longer).
  const auto beside = [&](const LtGemm& g, int held, double hold_us) {
    *started = 0;
    launch_hold_sms(held, static_cast<long long>(hold_us * 1e-6 * clock_hz), started_dev, hs);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (__atomic_load_n(started, __ATOMIC_ACQUIRE) < held) {
      if (std::chrono::steady_clock::now() > give_up)
        throw CudaError("the SM-holding blocks did not all become resident");
      std::this_thread::yield();
    }
    check(cudaEventRecord(e0, gs), "cudaEventRecord");
    g.run(buf.a, buf.b, buf.c, buf.ws, gs);
    check(cudaEventRecord(e1, gs), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    const bool holder_running = cudaStreamQuery(hs) == cudaErrorNotReady;
    check(cudaStreamSynchronize(hs), "holder");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    return holder_running ? 1e3 * ms : -1.0;
  };

  for (const auto& s : shapes) {
    const LtGemm whole(lt, s.m, s.n, s.k, false, ws_bytes);
    if (!whole.ok()) {
      notes.push_back("interference: no cuBLASLt algorithm for " + std::to_string(s.m) + "x" +
                      std::to_string(s.n) + "x" + std::to_string(s.k));
      continue;
    }
    const double alone_us = time_us(gs, o, [&] { whole.run(buf.a, buf.b, buf.c, buf.ws, gs); });
    for (const int held : {8, 16, 24, 32}) {
      if (held >= sms) continue;
      const LtGemm margin(lt, s.m, s.n, s.k, false, ws_bytes, sms - held);
      for (const bool planned_for_all : {true, false}) {
        const LtGemm& g = planned_for_all ? whole : margin;
        if (!g.ok()) continue;
        const double own_alone =
            planned_for_all ? alone_us
                            : time_us(gs, o, [&] { g.run(buf.a, buf.b, buf.c, buf.ws, gs); });
        std::vector<double> t;
        double hold_us = 3 * own_alone + 200;
        for (int runs = 0; runs < o.warmup + o.repeats && hold_us < 1e7;) {
          const double us = beside(g, held, hold_us);
          if (us < 0) {
            hold_us *= 4;  // the holder ended first: hold longer and run again
            continue;
          }
          if (runs++ >= o.warmup) t.push_back(us);
        }
        if (t.empty()) continue;
        rows.push_back({{"dtype", "bf16"},
                        {"m", s.m},
                        {"n", s.n},
                        {"k", s.k},
                        {"sms", sms},
                        {"held_sms", held},
                        {"planned_for", planned_for_all ? sms : sms - held},
                        {"alone_us", own_alone},
                        {"beside_us", median_us(std::move(t))}});
      }
    }
  }
  out["interference"] = rows;
  cublasLtDestroy(lt);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFreeHost(started);
  cudaStreamDestroy(gs);
  cudaStreamDestroy(hs);
}

}  // namespace calib
