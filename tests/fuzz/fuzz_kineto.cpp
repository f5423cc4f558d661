// Fuzzes the PyTorch profiler (Kineto) trace reader (`calibrate kineto`): what it accepts gives
// finite, non-negative per-step times and GEMM points that a calibration profile can hold.
#include <cmath>

#include "compute/kineto_trace.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto s = meshsim::read_kineto_json(meshsim::fuzz::parse(text), "fuzz.json");
    for (double v : {s.step_s, s.gemm_s, s.attention_s, s.other_compute_s})
      if (!std::isfinite(v) || v < 0) __builtin_trap();
    for (const auto& p : s.gemm_points) {
      if (!std::isfinite(p.flops_per_s) || !(p.flops_per_s > 0) || p.flops_per_s > 1e18)
        __builtin_trap();
      if (p.shape.m < 1 || p.shape.n < 1 || p.shape.k < 1 || p.shape.m > (1 << 24) ||
          p.shape.n > (1 << 24) || p.shape.k > (1 << 24))
        __builtin_trap();
    }
  });
}
