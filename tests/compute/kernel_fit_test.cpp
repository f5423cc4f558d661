#include "compute/kernel_fit.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "compute/compute_model.hpp"
#include "compute/kernel_time.hpp"
#include "compute/nelder_mead.hpp"
#include "core/rng.hpp"

using namespace meshsim;

TEST_CASE("Nelder-Mead finds the Rosenbrock minimum") {
  // f = (1 − x)² + 100 (y − x²)², minimum 0 at (1, 1).
  const auto m = nelder_mead(
      [](const std::vector<double>& v) {
        return std::pow(1 - v[0], 2) + 100 * std::pow(v[1] - v[0] * v[0], 2);
      },
      {-1.2, 1.0}, {0.5, 0.5}, 3, 1e-14, 20000);
  CHECK(m.x[0] == doctest::Approx(1.0).epsilon(1e-3));
  CHECK(m.x[1] == doctest::Approx(1.0).epsilon(1e-3));
  CHECK(m.value < 1e-6);
}

TEST_CASE("the kernel fit recovers the parameters that generated its data") {
  const auto gpu = *find_gpu("H100-SXM5-80GB");
  KernelParams truth = generic_kernel_params();
  truth.gemm = {.fraction_16bit = 0.7,
                .fraction_fp8 = 0.6,
                .k_half = 100,
                .intensity_half = 8,
                .memory_fraction = 0.85,
                .sharpness = 2,
                .fixed_s = 4e-6};
  truth.of(MemoryClass::norm) = {0.4, 1.5e-6, 4e-6, 2.0};
  truth.decode = {0.7, 12e-6, 0.2e-6};
  std::vector<MeasuredKernel> rows;
  for (std::int64_t m : {1, 8, 64, 128, 200, 512, 1024, 2048, 4096, 8192})
    for (auto [n, k] : {std::pair{12288, 4096},
                        {4096, 4096},
                        {4096, 11008},
                        {1536, 4096},
                        {4096, 512},
                        {28672, 8192}}) {
      const auto kernel = gemm_kernel({m, n, k, 1}, DType::bf16);
      rows.push_back({kernel, kernel_seconds(kernel, gpu, truth), "g", "", "", m});
    }
  // Norms from the floor through the L2 ramp (26–52 MB on H100) to HBM.
  for (double bytes : {1e4, 1e5, 1e6, 1e7, 2e7, 3e7, 4e7, 1e8, 1e9}) {
    const auto kernel = memory_kernel(MemoryClass::norm, bytes);
    rows.push_back({kernel, kernel_seconds(kernel, gpu, truth), "g", "", "", 0});
  }
  for (std::int64_t b : {1, 4, 16, 64, 256})
    for (std::int64_t ctx : {1024, 8192}) {
      const auto kernel = attention_kernel({b, 1, ctx, 32, 128, 8, true, false}, DType::bf16);
      rows.push_back({kernel, kernel_seconds(kernel, gpu, truth), "g", "", "", 0});
    }
  const auto fit = fit_kernel_params(rows, gpu, generic_kernel_params());
  // Exact data: every kernel within 1 % after the fit.
  for (double e : log_errors(rows, gpu, fit.params)) CHECK(e < 0.01);
  CHECK(fit.params.gemm.fraction_16bit == doctest::Approx(0.7).epsilon(0.03));
  CHECK(fit.params.of(MemoryClass::norm).bandwidth_fraction == doctest::Approx(0.4).epsilon(0.02));
  CHECK(fit.params.of(MemoryClass::norm).l2_speedup == doctest::Approx(2.0).epsilon(0.03));
  CHECK(fit.params.decode.fixed_s == doctest::Approx(12e-6).epsilon(0.05));
  // Only what was measured is written: gemm (16-bit), memory.norm, decode.
  CHECK(fit.model.contains("gemm"));
  CHECK_FALSE(fit.model["gemm"].contains("fraction_fp8"));
  CHECK(fit.model["memory"].size() == 1);
  CHECK(fit.model.contains("decode"));
  CHECK_FALSE(fit.model.contains("attention"));
  // Deterministic.
  CHECK(fit_kernel_params(rows, gpu, generic_kernel_params()).model == fit.model);
}

// Item 1 of the kernel-model issue: no GEMM discontinuity bigger than the measurements show.
// Sweeping M = 1 … 8192 one by one over layer shapes (N, K of Llama 8B/70B/405B at TP 1–8),
// neighbouring sizes never differ by more than 1.5× in time per FLOP, on every catalogue GPU,
// for 16-bit and (where the GPU has it) FP8.
TEST_CASE("GEMM continuity: no cliffs in time per FLOP along M") {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {6144, 4096},  {4096, 4096},  {28672, 4096},  {4096, 14336}, {768, 4096},    {4096, 512},
      {3584, 4096},  {4096, 1792},  {10240, 8192},  {8192, 8192},  {57344, 8192},  {8192, 28672},
      {1280, 8192},  {8192, 1024},  {7168, 8192},   {8192, 3584},  {18432, 16384}, {16384, 53248},
      {2304, 16384}, {16384, 2048}, {13312, 16384}, {16384, 6656}};
  for (const auto& gpu : gpu_catalogue()) {
    const ComputeModel cm(gpu);
    for (const DType dt : {DType::bf16, DType::fp8}) {
      if (!gpu.peak_flops.contains(std::string(name_of(dt)))) continue;
      double worst = 1;
      for (const auto& [n, k] : shapes) {
        double previous = 0;
        for (std::int64_t m = 1; m <= 8192; ++m) {
          const auto kernel = gemm_kernel({m, n, k, 1}, dt);
          const double per_flop = cm.seconds(kernel) / kernel.flops;
          // A memory-bound GEMM's time per FLOP falls as 1/M by itself: that part of the
          // ratio, (M − 1)/M, is not a cliff and is taken out.
          const double natural = static_cast<double>(m - 1) / static_cast<double>(m);
          if (previous > 0)
            worst = std::max(worst, std::max(per_flop / previous, previous / per_flop) * natural);
          previous = per_flop;
        }
      }
      INFO(gpu.model << " " << name_of(dt));
      CHECK(worst <= 1.5);
    }
  }
}
