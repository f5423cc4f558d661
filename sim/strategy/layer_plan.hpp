#pragma once
// One layer's compute, grouped into the segments between which communication happens, with the
// time of each segment from the compute model: forward, backward-input (dgrad) and
// backward-weight (wgrad) separately.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "compute/compute_model.hpp"
#include "model/op_catalogue.hpp"
#include "stack/stack.hpp"

namespace meshsim {

// norm1 | TP all-gather (SP) | qkv | CP exchange | attn | out | TP reduce | mid | EP dispatch or
// TP all-gather | mlp | EP combine or TP reduce | end
enum class Seg : std::uint8_t { norm1, qkv, attn, out, mid, mlp, end };
inline constexpr std::size_t kSegCount = 7;

struct SegmentCost {
  Time time;
  // The same kernels while a collective's CTAs hold SMs beside them (interference; = time when
  // the stack models none).
  Time interfered;
  double model_flops = 0;     // MFU convention
  double hardware_flops = 0;  // what the kernels execute
  // The kernels' HBM bytes at the achievable bandwidth (hbm_achievable_Bps): the part of `time`
  // a collective's HBM traffic can slow (interference).
  double hbm_s = 0;
  // Kernels the host launches for these ops (host issue, when the profile measures its cost).
  double kernels = 0;
};
SegmentCost& operator+=(SegmentCost& a, const SegmentCost& b);

// The HBM bandwidth a streaming kernel reaches on the GPU of `cm`: the elementwise class's
// fitted fraction of the specification (a residual add, measured: ../shared/measurements).
double hbm_achievable_Bps(const ComputeModel& cm);

// The GEMMs of a segment that tensor-parallel overlap pipelines with its collective, with their
// kernels (GEMM parts expanded when the stack runs them separately).
struct TpGemm {
  std::string name;
  TpRole role = TpRole::replicated;
  Kernel forward, backward_input, backward_weight;
};

// How kernels are priced: the compute model, the stack's kernels, and (interference) the same
// GPU with the SMs a concurrent NCCL collective takes.
struct PlanPricing {
  const ComputeModel& cm;
  const Stack& stack;
  const ComputeModel* interfered = nullptr;  // null: no interference
  std::vector<RecomputeUnit> recompute;      // a selective policy's regions
  // The TP degree and sequence parallelism (where an FP8 output gradient is cast: before or
  // after its all-gather).
  std::int64_t tp = 1;
  bool sp = false;
  // ZeRO-3/FSDP gathers the weights (a shard group of more than one): on a stack with an FP8
  // FSDP all-gather, the FP8 linears' weights arrive in FP8 (fp8_cast_kernels).
  bool fsdp = false;
};

// The FP8 quantization kernels around a GEMM op as the stack runs them (Stack::fp8_casts):
// elementwise kernels over the GEMM's weight and input before its forward GEMM and over its
// output gradient before its dgrad GEMM. Empty outside FP8 GEMMs and for ops the stack lists
// none for. Each kernel has a label beside it: "cast", "amax" (a dynamic scale's reduction),
// "weight_cast", "weight_amax" or "weight_transpose". `fsdp`: the weights are gathered by FSDP
// (PlanPricing::fsdp).
struct Fp8CastKernels {
  std::vector<Kernel> forward, dgrad;
  std::vector<std::string_view> forward_labels, dgrad_labels;
};
Fp8CastKernels fp8_cast_kernels(const OpSpec& op, const Stack& stack, std::int64_t tp, bool sp,
                                bool fsdp = false);

struct LayerPlan {
  std::array<SegmentCost, kSegCount> forward, dgrad, wgrad;
  std::array<std::vector<TpGemm>, kSegCount> tp_gemms;  // column- and row-parallel GEMMs
  SegmentCost recompute;  // the selective policy's ops, re-run before the layer's backward
  // The re-run TP-sharded GEMMs (TP > 1) whose checkpoint re-runs their collectives too
  // (RecomputeUnit::reruns_collectives), as they run, and how many of them are
  // column-parallel ops (each gathers its input under sequence parallelism) and row-parallel
  // ops (each reduces its output).
  std::vector<TpGemm> recompute_tp_gemms;
  int recompute_gathers = 0, recompute_reductions = 0;
  // The MoE dispatch's and combine's all-to-alls re-run with them (an MoE layer's checkpoint).
  bool recompute_dispatch = false, recompute_combine = false;
  double dense_params = 0, expert_params = 0;  // on this rank
  // Of dense_params, those FSDP gathers in FP8 (fsdp_gathers_fp8): the all-gather moves them in
  // one byte.
  double fp8_gathered_params = 0;
  double saved_bytes = 0;
  bool moe = false;
  bool tp_reduce_after_mlp = true;  // dense MLP or MoE shared experts are TP-sharded
};

// Segment of a catalogue op, by its name.
Seg segment_of(const OpSpec& op);

// Whether the stack runs this fused GEMM as one GEMM per part (torchtitan's wq, wk, wv).
bool runs_as_parts(const OpSpec& op, const Stack& stack);

// One op's kernels as the stack runs them (GEMM parts, eager kernel splits).
struct OpKernelCost {
  SegmentCost forward, dgrad, wgrad;
};
OpKernelCost price_op(const OpSpec& op, const PlanPricing& pricing, double slowdown = 1.0);

// `expert_slowdown` multiplies the expert GEMMs (token imbalance: the busiest EP rank).
LayerPlan plan_layer(const std::vector<OpSpec>& ops, const PlanPricing& pricing, bool moe,
                     bool shared_experts, double expert_slowdown);

// Sum of an op list's kernels: the embedding and head ends.
struct EndCost {
  SegmentCost forward, dgrad, wgrad;
  double params = 0;
};
EndCost plan_end(const std::vector<OpSpec>& ops, const PlanPricing& pricing);

}  // namespace meshsim
