#pragma once
// A PyTorch profiler (Kineto) Chrome trace of real training steps, read as measured per-op
// times: GPU kernels of one device classified as GEMM (cuBLAS/CUTLASS: gemm, cutlass, xmma,
// nvjet), attention (flash, fmha, attention, sdpa), NCCL collectives (by op) or other compute,
// summed per profiled step; and GEMM shapes with their kernel time, from the aten::mm / addmm /
// bmm CPU ops recorded with shapes (record_shapes=True) joined to their kernels by External id.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compute/calibration_profile.hpp"

namespace meshsim {

struct KinetoSummary {
  std::string file;
  int device = 0;
  int steps = 1;      // ProfilerStep# spans (1 when the trace has none)
  double step_s = 0;  // mean ProfilerStep# wall time (0 when none)
  // Per step, summed kernel time on `device`.
  double gemm_s = 0, attention_s = 0, other_compute_s = 0;
  std::map<std::string, double> comm_s;  // by collective name (all_reduce, ...)
  std::size_t kernels = 0;
  std::vector<GemmPoint> gemm_points;  // median rate per (dtype, M, N, K, batch)
  // The host's time per kernel launch, on the thread that launches the most kernels: the median
  // time from one launch call (cudaLaunchKernel and its kin) to the next, less the part of a
  // launch call beyond the median call (a full launch queue blocks inside it), over the pairs
  // with no synchronizing call between them. Unset when the trace has fewer than 16 such pairs
  // (a trace without CUDA runtime events: profile with ProfilerActivity.CPU).
  std::optional<double> host_per_kernel_s;
  double launch_call_s = 0;     // median duration of one launch call on that thread
  std::size_t launch_gaps = 0;  // the pairs the median is over
  double compute_s() const { return gemm_s + attention_s + other_compute_s; }
};

// Errors name the file (and the JSON path of a malformed event).
KinetoSummary read_kineto_trace(const std::string& path, int device = 0);
// The same from a parsed document; `path` names it in errors (fuzz_kineto enters here).
KinetoSummary read_kineto_json(const Json& doc, const std::string& path, int device = 0);

// "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" → "all_reduce"; "" when not an NCCL kernel.
std::string nccl_kernel_op(const std::string& kernel_name);

}  // namespace meshsim
