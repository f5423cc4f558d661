#pragma once
// A calibration profile: kernel timings measured on a real GPU (by tools/calibrate, or read off
// published microbenchmarks) that replace the default efficiency curves where they apply.
#include <optional>
#include <string>
#include <vector>

#include "compute/dtype.hpp"
#include "compute/kernel.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"
#include "network/link_calibration.hpp"

namespace meshsim {

struct GemmPoint {
  DType dtype = DType::bf16;
  GemmShape shape;
  double flops_per_s = 0;  // measured 2MNK·batch / time
};

struct AttentionPoint {
  DType dtype = DType::bf16;
  AttentionShape shape;
  double flops_per_s = 0;  // measured, counting FLOPs as attention_kernel() does
};

struct CalibrationProfile {
  std::string gpu;  // the GPU model it was measured on; a mismatch with the cluster is an error
  std::string source;
  std::string file;
  std::optional<Time> launch_overhead;
  std::optional<double> memory_bandwidth_Bps;  // achieved streaming bandwidth
  // How a GEMM beside a collective's CTAs ran on this GPU (harness `interference` section):
  // as launched for every SM (true) or as if planned for the SMs left (false); unset: the
  // model's assumption (launched for every SM, compute/kernel_time.hpp SmsTaken).
  std::optional<bool> gemm_launched_for_all_sms;
  // What a kernel costs a stream beyond its own duration (harness `launch` section): the gap
  // between back-to-back kernels launched one by one with the host ahead, and replayed as a CUDA
  // graph; and the host's CPU time per launch (a lower bound on a framework's per-op host cost).
  // Unset: not measured, and not modelled.
  std::optional<double> kernel_gap_s, graph_kernel_gap_s, host_launch_s;
  // A framework's host time per kernel it launches (Python, dispatch and the launch itself), as
  // a PyTorch profiler trace of a real step shows it between consecutive launches (`calibrate
  // kineto --write-profile`). Unset: the harness's `host_launch_us` stands in (a floor), or 0.
  std::optional<double> host_per_kernel_s;
  std::vector<GemmPoint> gemm;
  std::vector<AttentionPoint> attention;
  // Fitted kernel parameters (compute/kernel_params.hpp), laid over the GPU's bundled ones;
  // validated when read, applied by the compute model.
  std::optional<Json> model;
  LinkCalibration links;  // point-to-point and collective α-β fits (network/link_calibration.hpp)
};

// {gpu, source, launch_overhead_us?, memory_bandwidth_GBps?,
//  gemm_beside_collective?: "launched_for_all_sms" | "planned_for_sms_left",
//  kernel_gap_us?, graph_kernel_gap_us?, host_launch_us?, host_per_kernel_us?,
//  gemm: [{dtype, m, n, k, batch?, tflops}], attention: [{dtype, batch, seq_q, seq_kv?, heads,
//  kv_heads?, head_dim, causal, direction: forward|backward, tflops}],
//  model?: {gemm?, memory?, attention?, decode?} (compute/kernel_params.hpp),
//  links?: {p2p: [...], collectives: [...]} (network/link_calibration.hpp)}
inline constexpr const char* kLaunchedForAllSms = "launched_for_all_sms";
inline constexpr const char* kPlannedForSmsLeft = "planned_for_sms_left";
CalibrationProfile read_calibration_profile(const JsonRef& root);
CalibrationProfile load_calibration_profile(const std::string& path);
Json to_json(const CalibrationProfile& p);

}  // namespace meshsim
