#include "compute/compute_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "compute/bundled_profiles.hpp"
#include "compute/kernel_time.hpp"
#include "core/error.hpp"

namespace meshsim {

namespace {

double log2d(std::int64_t v) {
  return std::log2(static_cast<double>(std::max<std::int64_t>(v, 1)));
}

std::array<double, 4> gemm_coords(const GemmShape& s) {
  return {log2d(s.m), log2d(s.n), log2d(s.k), log2d(s.batch)};
}

std::array<double, 4> attention_coords(const AttentionShape& s) {
  return {log2d(s.seq_q), log2d(s.seq_kv), log2d(s.head_dim), log2d(s.batch * s.heads)};
}

std::uint8_t gemm_tag(DType d) {
  return d == DType::fp8 ? 1 : 0;  // bf16, fp16 and fp32 are one class
}
std::uint8_t attention_tag(const AttentionShape& s) {
  return static_cast<std::uint8_t>((s.causal ? 1 : 0) | (s.backward ? 2 : 0));
}

// Weights 1/d² · (1 − d²/R²)² inside the radius R, and a fixed weight 1/R² for "no
// correction": exact at a measured point (the weight diverges), continuous everywhere, and
// exactly the model beyond R of every point.
struct LocalIdw {
  double weight_sum = 1.0 / (kCorrectionRadius * kCorrectionRadius), value_sum = 0;
  bool exact = false;
  double exact_value = 0;
  void add(const std::array<double, 4>& q, const std::array<double, 4>& p, double log_correction) {
    if (exact) return;
    double d2 = 0;
    for (int i = 0; i < 4; ++i) d2 += (q[i] - p[i]) * (q[i] - p[i]);
    constexpr double r2 = kCorrectionRadius * kCorrectionRadius;
    if (d2 >= r2) return;
    if (d2 < 1e-18) {
      exact = true;
      exact_value = log_correction;
      return;
    }
    const double fade = (1 - d2 / r2) * (1 - d2 / r2);
    weight_sum += fade / d2;
    value_sum += fade * log_correction / d2;
  }
  double result() const { return exact ? exact_value : value_sum / weight_sum; }
};

}  // namespace

ComputeModel::ComputeModel(GpuSpec gpu, std::optional<CalibrationProfile> profile, SmsTaken taken)
    : gpu_(std::move(gpu)), kernel_gpu_(gpu_), taken_(taken), profile_(std::move(profile)) {
  if (gpu_.sm_count <= 0) throw Error(gpu_.model, "sm_count", "must be greater than zero");
  if (gpu_.hbm_Bps <= 0) throw Error(gpu_.model, "hbm_GBps", "must be greater than zero");
  params_ = bundled_kernel_params(gpu_);
  measured_gpu_ = bundled_profile(gpu_).gpu == gpu_.model;
  if (!profile_) return;
  if (profile_->gpu != gpu_.model)
    throw Error(
        profile_->file, "/gpu",
        "profile was measured on '" + profile_->gpu + "' but the cluster has '" + gpu_.model + "'");
  // Kernel numbers measured on this GPU: a fitted model or measured points (a profile of link
  // fits alone leaves the kernels as the bundled fit prices them).
  measured_gpu_ =
      measured_gpu_ || profile_->model || !profile_->gemm.empty() || !profile_->attention.empty();
  if (profile_->model)
    params_ = read_kernel_params(JsonRef::root(*profile_->model, profile_->file), params_);
  // A harness HBM sweep (copy/triad) measures streaming kernels: it sets the elementwise and
  // optimizer classes unless the profile fitted them from kernels of their own.
  const bool fitted_memory = profile_->model && profile_->model->contains("memory");
  if (!fitted_memory && profile_->memory_bandwidth_Bps)
    for (const auto c : {MemoryClass::elementwise, MemoryClass::optimizer})
      params_.of(c).bandwidth_fraction =
          std::min(1.0, *profile_->memory_bandwidth_Bps / gpu_.hbm_Bps);
  if (!fitted_memory && profile_->launch_overhead)
    for (const auto c : {MemoryClass::elementwise, MemoryClass::optimizer})
      params_.of(c).fixed_s = params_.of(c).floor_s = profile_->launch_overhead->seconds();
  // Corrections against the whole GPU's model, so a model with SMs taken keeps its ratio to it.
  const auto whole_gpu = [this](const Kernel& k) {
    return kernel_seconds(k, kernel_gpu_, params_);
  };
  std::vector<MeasuredPoint> gemm, attention;
  for (const auto& p : profile_->gemm) {
    const auto k = gemm_kernel(p.shape, p.dtype);
    gemm.push_back({gemm_coords(p.shape), std::log(k.flops / p.flops_per_s / whole_gpu(k)),
                    gemm_tag(p.dtype)});
  }
  for (const auto& p : profile_->attention) {
    const auto k = attention_kernel(p.shape, p.dtype);
    attention.push_back({attention_coords(p.shape),
                         std::log(k.flops / p.flops_per_s / whole_gpu(k)), attention_tag(p.shape)});
  }
  gemm_points_ = MeasuredPoints(std::move(gemm), kCorrectionRadius);
  attention_points_ = MeasuredPoints(std::move(attention), kCorrectionRadius);
}

double ComputeModel::peak_flops(DType dtype) const {
  return kernel_gpu_.peak_flops(dtype);
}

double ComputeModel::model_seconds(const Kernel& k) const {
  return kernel_seconds(k, kernel_gpu_, params_, taken_);
}

double ComputeModel::correction(const Kernel& k) const {
  LocalIdw idw;
  const auto visit = [&](const std::array<double, 4>& q, std::uint8_t tag) {
    return [&idw, q, tag](const MeasuredPoint& p) {
      if (p.tag == tag) idw.add(q, p.coords, p.log_correction);
    };
  };
  if (k.kind == KernelKind::gemm && !gemm_points_.empty()) {
    const auto q = gemm_coords(k.gemm);
    gemm_points_.near(q, visit(q, gemm_tag(k.dtype)));
  } else if (k.kind == KernelKind::attention && !attention_points_.empty()) {
    const auto q = attention_coords(k.attention);
    attention_points_.near(q, visit(q, attention_tag(k.attention)));
  } else {
    return 1.0;
  }
  return std::exp(idw.result());
}

double ComputeModel::seconds(const Kernel& k) const {
  if (k.empty()) return 0.0;
  const double model = model_seconds(k);
  // Without measured points the correction is exactly 1: not looked for (a price runs
  // thousands of times per trace).
  return gemm_points_.empty() && attention_points_.empty() ? model : model * correction(k);
}

Time ComputeModel::time(const Kernel& k) const {
  return Time::from_seconds_ceil(seconds(k));
}

std::string ComputeModel::describe() const {
  const std::string base = bundled_kernel_source(gpu_);
  if (!profile_) return base;
  std::string s =
      "calibration profile " + profile_->file + " (" + profile_->source + ") over " + base;
  if (profile_->kernel_gap_s)
    s += fmt::format("; {:.2f} µs measured between kernels", *profile_->kernel_gap_s * 1e6);
  if (const double h = host_per_kernel_s(); h > 0)
    s += fmt::format("; host {:.2f} µs per kernel launched{}", h * 1e6,
                     profile_->host_per_kernel_s ? "" : " (the bare launch: a floor)");
  return s;
}

}  // namespace meshsim
