// HBM bandwidth: device-to-device copies (read + write) and a STREAM triad a = b + s·c (two
// reads, one write) over buffer sizes from 1 MiB to the sweep limit; `bytes` is what moves.
#include "harness.hpp"

namespace calib {

void bench_membw(const Options& o, Json& out, std::vector<std::string>& notes) {
  check(cudaSetDevice(0), "cudaSetDevice");
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  size_t max = std::min<size_t>(static_cast<size_t>(o.max_bytes) / 2, free_b / 4);
  if (max < (1u << 20)) {
    notes.push_back("membw: less than 4 MiB free; skipped");
    return;
  }
  cudaStream_t st;
  check(cudaStreamCreate(&st), "cudaStreamCreate");
  void *a, *b, *c;
  check(cudaMalloc(&a, max), "cudaMalloc");
  check(cudaMalloc(&b, max), "cudaMalloc");
  check(cudaMalloc(&c, max), "cudaMalloc");
  launch_fill(b, max, st);
  launch_fill(c, max, st);
  Json rows = out.value("membw", Json::array());
  for (size_t size = 1u << 20; size <= max; size *= 2) {
    const double copy_us = time_us(st, o, [&] {
      check(cudaMemcpyAsync(a, b, size, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
    });
    rows.push_back({{"kind", "copy"},
                    {"bytes", 2.0 * static_cast<double>(size)},
                    {"time_us", copy_us},
                    {"GBps", 2.0 * static_cast<double>(size) / (copy_us * 1e-6) / 1e9}});
    const size_t n = size / sizeof(float);
    const double triad_us = time_us(st, o, [&] {
      launch_triad(static_cast<float*>(a), static_cast<const float*>(b),
                   static_cast<const float*>(c), 3.f, n, st);
    });
    rows.push_back({{"kind", "triad"},
                    {"bytes", 3.0 * static_cast<double>(size)},
                    {"time_us", triad_us},
                    {"GBps", 3.0 * static_cast<double>(size) / (triad_us * 1e-6) / 1e9}});
  }
  out["membw"] = rows;
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaStreamDestroy(st);
}

}  // namespace calib
