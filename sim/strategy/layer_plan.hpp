#pragma once
// One layer's compute, grouped into the segments between which communication happens, with the
// time of each segment from the compute model: forward, backward-input (dgrad) and
// backward-weight (wgrad) separately.
#include <array>
#include <cstdint>

#include "compute/compute_model.hpp"
#include "model/op_catalogue.hpp"

namespace meshsim {

// norm1 | TP all-gather (SP) | qkv | CP exchange | attn | out | TP reduce | mid | EP dispatch or
// TP all-gather | mlp | EP combine or TP reduce | end
enum class Seg : std::uint8_t { norm1, qkv, attn, out, mid, mlp, end };
inline constexpr std::size_t kSegCount = 7;

struct SegmentCost {
  Time time;
  double model_flops = 0;     // MFU convention
  double hardware_flops = 0;  // what the kernels execute
};

struct LayerPlan {
  std::array<SegmentCost, kSegCount> forward, dgrad, wgrad;
  double dense_params = 0, expert_params = 0;  // on this rank
  double saved_bytes = 0;
  bool moe = false;
  bool tp_reduce_after_mlp = true;  // dense MLP or MoE shared experts are TP-sharded
};

// Segment of a catalogue op, by its name.
Seg segment_of(const OpSpec& op);

// `expert_slowdown` multiplies the expert GEMMs (token imbalance: the busiest EP rank).
LayerPlan plan_layer(const std::vector<OpSpec>& ops, const ComputeModel& cm, bool moe,
                     bool shared_experts, double expert_slowdown);

// Sum of an op list's kernels: the embedding and head ends.
struct EndCost {
  SegmentCost forward, dgrad, wgrad;
  double params = 0;
};
EndCost plan_end(const std::vector<OpSpec>& ops, const ComputeModel& cm);

}  // namespace meshsim
