// Peer-to-peer copies between every ordered GPU pair with peer access, over message sizes from
// 4 KiB to 1 GiB: bandwidth and, from the smallest size, latency. The link class of a pair is
// NVLink when NVML reports NVLinks between them, PCIe otherwise.
#include "harness.hpp"

namespace calib {

void bench_p2p(const Options& o, Json& out, std::vector<std::string>& notes) {
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (n < 2) {
    notes.push_back("p2p: one GPU visible; peer-to-peer copies skipped");
    return;
  }
  const size_t max = std::min<size_t>(1u << 30, static_cast<size_t>(o.max_bytes));
  std::vector<void*> buf(static_cast<size_t>(n), nullptr);
  for (int d = 0; d < n; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaMalloc(&buf[static_cast<size_t>(d)], max), "cudaMalloc");
  }
  Json rows = out.value("p2p", Json::array());
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst) {
      if (src == dst) continue;
      int can = 0;
      check(cudaDeviceCanAccessPeer(&can, src, dst), "cudaDeviceCanAccessPeer");
      if (!can) {
        notes.push_back("p2p: no peer access " + std::to_string(src) + " -> " +
                        std::to_string(dst) + " (copies would stage through the host)");
        continue;
      }
      check(cudaSetDevice(src), "cudaSetDevice");
      const auto e = cudaDeviceEnablePeerAccess(dst, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        check(e, "cudaDeviceEnablePeerAccess");
      cudaGetLastError();
      cudaStream_t st;
      check(cudaStreamCreate(&st), "cudaStreamCreate");
      const char* link = nvlinks_between(src, dst) > 0 ? "nvlink" : "pcie";
      for (size_t size = 4096; size <= max; size *= 4) {
        const double us = time_us(st, o, [&] {
          check(cudaMemcpyPeerAsync(buf[static_cast<size_t>(dst)], dst,
                                    buf[static_cast<size_t>(src)], src, size, st),
                "cudaMemcpyPeerAsync");
        });
        rows.push_back({{"src", src},
                        {"dst", dst},
                        {"link", link},
                        {"bytes", static_cast<double>(size)},
                        {"time_us", us},
                        {"GBps", static_cast<double>(size) / (us * 1e-6) / 1e9}});
      }
      cudaStreamDestroy(st);
    }
  out["p2p"] = rows;
  for (int d = 0; d < n; ++d) {
    cudaSetDevice(d);
    cudaFree(buf[static_cast<size_t>(d)]);
  }
}

}  // namespace calib
