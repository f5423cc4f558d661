#include "compute/compute_model.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace meshsim {
namespace {

double log2d(std::int64_t v) {
  return std::log2(static_cast<double>(std::max<std::int64_t>(v, 1)));
}

Eigen::Vector4d gemm_coords(const GemmShape& s) {
  return {log2d(s.m), log2d(s.n), log2d(s.k), log2d(s.batch)};
}

Eigen::Vector4d attention_coords(const AttentionShape& s) {
  return {log2d(s.seq_q), log2d(s.seq_kv), log2d(s.head_dim), log2d(s.batch * s.heads)};
}

// Shepard interpolation of log-corrections: exact at a measured point, a weighted mean of the
// measured corrections elsewhere (so it never leaves their range), nearer points weigh more.
struct Idw {
  double weight_sum = 0, value_sum = 0;
  bool exact = false;
  double exact_value = 0;
  void add(const Eigen::Vector4d& query, const Eigen::Vector4d& point, double log_correction) {
    if (exact) return;
    const double d2 = (query - point).squaredNorm();
    if (d2 < 1e-18) {
      exact = true;
      exact_value = log_correction;
      return;
    }
    weight_sum += 1.0 / d2;
    value_sum += log_correction / d2;
  }
  double result() const {
    if (exact) return exact_value;
    return weight_sum > 0 ? value_sum / weight_sum : 0.0;
  }
};

}  // namespace

ComputeModel::ComputeModel(GpuSpec gpu, std::optional<CalibrationProfile> profile)
    : gpu_(std::move(gpu)), defaults_(default_efficiency(gpu_)), profile_(std::move(profile)) {
  if (gpu_.sm_count <= 0) throw Error(gpu_.model, "sm_count", "must be greater than zero");
  if (profile_ && profile_->gpu != gpu_.model)
    throw Error(
        profile_->file, "/gpu",
        "profile was measured on '" + profile_->gpu + "' but the cluster has '" + gpu_.model + "'");
}

double ComputeModel::peak_flops(DType dtype) const {
  const auto it = gpu_.peak_flops.find(std::string(name_of(dtype)));
  if (it != gpu_.peak_flops.end()) return it->second;
  // FP32 GEMMs in training run on tensor cores as TF32 (PyTorch allow_tf32 for matmul).
  if (dtype == DType::fp32)
    if (auto tf = gpu_.peak_flops.find("tf32"); tf != gpu_.peak_flops.end()) return tf->second;
  throw Error(gpu_.model, "peak_flops",
              "this GPU has no " + std::string(name_of(dtype)) + " tensor-core peak");
}

double ComputeModel::memory_bandwidth_Bps() const {
  if (profile_ && profile_->memory_bandwidth_Bps) return *profile_->memory_bandwidth_Bps;
  return gpu_.hbm_Bps * defaults_.memory_bandwidth_fraction;
}

Time ComputeModel::launch_overhead() const {
  if (profile_ && profile_->launch_overhead) return *profile_->launch_overhead;
  return defaults_.launch_overhead;
}

double ComputeModel::gemm_efficiency(const GemmShape& shape, DType dtype) const {
  const auto it = defaults_.gemm_peak_fraction.find(dtype);
  const double f = it == defaults_.gemm_peak_fraction.end()
                       ? defaults_.gemm_peak_fraction.at(DType::bf16)
                       : it->second;
  const double k = static_cast<double>(std::max<std::int64_t>(shape.k, 1));
  return f * gemm_quantization(shape, defaults_.tile, gpu_.sm_count) *
         (k / (k + defaults_.gemm_k_ramp));
}

double ComputeModel::attention_efficiency(const AttentionShape& shape) const {
  return defaults_.attention_peak_fraction *
         attention_quantization(shape, defaults_.tile, gpu_.sm_count);
}

double ComputeModel::uncorrected_seconds(const Kernel& k) const {
  if (k.empty()) return 0.0;
  double compute_s = 0;
  if (k.flops > 0) {
    switch (k.kind) {
      case KernelKind::gemm:
        compute_s = k.flops / (peak_flops(k.dtype) * gemm_efficiency(k.gemm, k.dtype));
        break;
      case KernelKind::attention:
        // FlashAttention runs its GEMMs in bf16/fp16 even in FP8 recipes (Transformer Engine's
        // default DotProductAttention), so the 16-bit peak applies.
        compute_s = k.flops / (peak_flops(k.dtype == DType::fp8 ? DType::bf16 : k.dtype) *
                               attention_efficiency(k.attention));
        break;
      case KernelKind::memory_bound:
      case KernelKind::none:
        break;
    }
  }
  const double memory_s = k.bytes / memory_bandwidth_Bps();
  return std::max(compute_s, memory_s) + launch_overhead().seconds();
}

double ComputeModel::correction(const Kernel& k) const {
  if (!profile_) return 1.0;
  Idw idw;
  if (k.kind == KernelKind::gemm) {
    const auto q = gemm_coords(k.gemm);
    for (const auto& p : profile_->gemm) {
      if (p.dtype != k.dtype) continue;
      const auto measured = gemm_kernel(p.shape, p.dtype);
      const double measured_s = measured.flops / p.flops_per_s;
      idw.add(q, gemm_coords(p.shape), std::log(measured_s / uncorrected_seconds(measured)));
    }
  } else if (k.kind == KernelKind::attention) {
    const auto q = attention_coords(k.attention);
    for (const auto& p : profile_->attention) {
      if (p.shape.causal != k.attention.causal || p.shape.backward != k.attention.backward)
        continue;
      const auto measured = attention_kernel(p.shape, p.dtype);
      const double measured_s = measured.flops / p.flops_per_s;
      idw.add(q, attention_coords(p.shape), std::log(measured_s / uncorrected_seconds(measured)));
    }
  }
  return std::exp(idw.result());
}

double ComputeModel::seconds(const Kernel& k) const {
  if (k.empty()) return 0.0;
  return uncorrected_seconds(k) * correction(k);
}

Time ComputeModel::time(const Kernel& k) const {
  return Time::from_seconds_ceil(seconds(k));
}

std::string ComputeModel::describe() const {
  if (profile_) return "calibration profile " + profile_->file + " (" + profile_->source + ")";
  return "default efficiency curves: " + defaults_.source;
}

}  // namespace meshsim
