// Leave-one-model-out accuracy of the kernel model against Vidur's published per-operator
// measurements (validation/kernels/, converted from ../shared/measurements by
// tools/convert_vidur.py): fit on every model but one, predict the held-out one, per GPU.
// The targets ("Compute from measured kernels"): GEMMs median |error| ≤ 5 %, p95 ≤ 15 %,
// max ≤ 40 %; memory-bound kernels median ≤ 15 %; a layer's measured ops summed, median ≤ 5 %.
// Met: memory-bound medians and layer sums on both GPUs; every GEMM target on A100 when the
// held-out model is priced as a `calibrate fit` profile of the others leaves it (parameters and
// measured points). Not met: the H100 GEMM median, p95 and max (three models only, and cuBLAS's
// kernel choice scatters neighbouring shapes by 10–80 %: validation/kernels.md's scatter table,
// where interpolating each H100 GEMM between its own sweep neighbours has p95 16.7 %), and the
// A100 GEMM p95/max with the parameters alone. The ceilings are today's figures with a little
// headroom, so a regression fails; where they are looser than the targets they are not the targets.
// Writes validation/kernels.md. With MESHSIM_DUMP_KERNEL_CHECKS=PREFIX it also writes every
// checked kernel (measured and predicted) to PREFIX-GPU[-points].csv, for studying residuals.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "compute/calibration_fit.hpp"
#include "compute/kernel_validation.hpp"
#include "test_paths.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {
namespace {

std::vector<MeasuredKernel> measured(const std::string& rel) {
  const auto path = test::source_path(rel);
  const Json doc = load_json_file(path);
  FitOptions opt;
  opt.fit_model = false;
  return fit_calibration(JsonRef::root(doc, rel), opt).measured;
}

}  // namespace

TEST_CASE("measurement scatter: neighbours' line and the monotone bound, by hand") {
  // One GEMM sweep of 10, 14, 12, 16 µs at 1, 2, 3, 5 tokens: the 2-token point against the line
  // through its neighbours (11 µs) is −21.4 %, the 3-token point against (14 + (16 − 14)/3)
  // µs +22.2 %. The 2-token point is slower than the 3-token one: a model that never gets
  // faster with tokens misses one of them by at least (14 − 12)/(14 + 12) = 7.7 %. A row of
  // another op starts its own sweep; a row whose layer does not end in " T<tokens>" is in none.
  std::vector<MeasuredKernel> rows;
  const auto add = [&](const std::string& op, std::int64_t tokens, double us,
                       const std::string& layer) {
    MeasuredKernel k;
    k.kernel = gemm_kernel({tokens, 4096, 4096, 1}, DType::fp16);
    k.seconds = us * 1e-6;
    k.group = "m";
    k.op = op;
    k.tokens = tokens;
    k.layer = layer;
    rows.push_back(k);
  };
  for (const auto& [t, us] : {std::pair{1, 10.0}, {2, 14.0}, {3, 12.0}, {5, 16.0}})
    add("qkv_proj", t, us, "m tp1 T" + std::to_string(t));
  add("out_proj", 2, 3.0, "m tp1 T2");
  add("qkv_proj", 4, 1.0, "m tp1");  // not a sweep point
  const auto s = measurement_scatter(rows);
  REQUIRE(s.size() == 1);
  const auto& g = s.at("gemm");
  CHECK(g.neighbours.count == 2);
  CHECK(g.neighbours.max == doctest::Approx(4.0 / 18).scale(0));
  CHECK(g.neighbours.median == doctest::Approx((3.0 / 14 + 4.0 / 18) / 2).scale(0));
  CHECK(g.monotone_max == doctest::Approx(2.0 / 26).scale(0));
}

TEST_CASE("kernel accuracy: leave one model out over the Vidur measurements") {
  struct Ceiling {
    const char* file;
    const char* gpu;
    bool with_points;
    double gemm_median, gemm_p95, gemm_max, memory_median, layer_median;
  };
  // Parameters alone (the bundled default), then as `calibrate fit` leaves a profile: the
  // parameters and the other models' measured GEMMs. A100 with points meets every target.
  const Ceiling ceilings[] = {
      {"validation/kernels/vidur-h100.raw.json", "H100-SXM5-80GB", false, 0.08, 0.29, 1.20, 0.11,
       0.05},
      {"validation/kernels/vidur-a100.raw.json", "A100-SXM4-80GB", false, 0.055, 0.21, 0.46, 0.09,
       0.035},
      {"validation/kernels/vidur-h100.raw.json", "H100-SXM5-80GB", true, 0.07, 0.27, 1.15, 0.11,
       0.045},
      {"validation/kernels/vidur-a100.raw.json", "A100-SXM4-80GB", true, 0.05, 0.15, 0.40, 0.09,
       0.05},
  };
  std::vector<KernelValidation> runs;
  for (const auto& [file, gpu_name, with_points, gemm_median, gemm_p95, gemm_max, memory_median,
                    layer_median] : ceilings) {
    const auto gpu = *find_gpu(gpu_name);
    const auto rows = measured(file);
    runs.push_back(leave_one_group_out(rows, gpu, generic_kernel_params(),
                                       {"azure-microbenchmarks"}, with_points));
    const auto& v = runs.back();
    if (const char* dump = std::getenv("MESHSIM_DUMP_KERNEL_CHECKS"); dump && *dump) {
      std::ofstream out(std::string(dump) + "-" + gpu_name + (with_points ? "-points" : "") +
                        ".csv");
      out << "group,op,layer,kind,tokens,held_out,measured_s,predicted_s\n";
      for (const auto& c : v.kernels)
        out << c.group << ',' << c.op << ',' << c.layer << ',' << c.kind << ',' << c.tokens << ','
            << c.held_out << ',' << c.measured_s << ',' << c.predicted_s << '\n';
    }
    std::vector<double> gemm, memory, layers;
    for (const auto& c : v.kernels) {
      if (!c.held_out) continue;
      if (c.kind == "gemm")
        gemm.push_back(c.error());
      else if (c.kind != "attention" && c.kind != "decode")
        memory.push_back(c.error());
    }
    for (const auto& l : v.layers) layers.push_back(l.error());
    const auto g = error_stats(gemm), m = error_stats(memory), l = error_stats(layers);
    MESSAGE(std::string(gpu_name) << std::string(with_points ? " with points" : "")
                                  << ": gemm median " << 100 * g.median << " % p95 " << 100 * g.p95
                                  << " % max " << 100 * g.max << " %; memory median "
                                  << 100 * m.median << " %; layer median " << 100 * l.median
                                  << " % p95 " << 100 * l.p95 << " %");
    CHECK(g.count > 1000);
    CHECK(g.median <= gemm_median);
    CHECK(g.p95 <= gemm_p95);
    CHECK(g.max <= gemm_max);
    CHECK(m.median <= memory_median);
    CHECK(l.median <= layer_median);
  }
  const std::string preamble =
      "# Kernel model accuracy\n\n"
      "Generated by `build/release/tests/test_compute -tc=\"kernel accuracy*\"` (ctest label "
      "`accuracy`); do not edit.\n\n"
      "Leave-one-model-out over Vidur's published per-operator GPU measurements "
      "(`validation/kernels/*.raw.json`, converted from `../shared/measurements/` by "
      "`tools/convert_vidur.py`; MIT licence, provenance in that folder's README): for each "
      "GPU and each model, the kernel parameters (`sim/compute/kernel_params.hpp`) are fitted "
      "by `fit_kernel_params` to every other model's kernels and the held-out model's kernels "
      "are predicted. Errors are (predicted − measured) / measured of the kernel time; "
      "`layer sum` compares the sum of one transformer block's measured forward ops (GEMMs, "
      "norms, rotary, activation, residual add, embedding; attention is not in these files) "
      "with the sum of their predictions. Each GPU is shown twice: with the fitted parameters "
      "alone (what the bundled profiles hold) and as `calibrate fit` leaves a profile of the "
      "other models (parameters plus their measured GEMM points). The Azure microbenchmark rows "
      "(hardware.md C2) always stay in the training set.\n\n"
      "Assumptions: fp16 measurements stand for bf16 (one class); the `add` op is Vidur's "
      "last residual add, which reads L2-resident tensors; only decode-step KV appends are "
      "kept (tools/convert_vidur.py says why). Measurements have 1 µs resolution.\n";
  std::ofstream(test::source_path("validation/kernels.md"))
      << kernel_validation_markdown(runs, preamble);
}

}  // namespace meshsim
