#include "strategy/layer_plan.hpp"

#include <map>
#include <string>

namespace meshsim {

Seg segment_of(const OpSpec& op) {
  static const std::map<std::string, Seg, std::less<>> kSeg = {
      {"input_norm", Seg::norm1},
      {"qkv_proj", Seg::qkv},
      {"q_proj", Seg::qkv},
      {"q_down_proj", Seg::qkv},
      {"q_up_proj", Seg::qkv},
      {"kv_down_proj", Seg::qkv},
      {"kv_up_proj", Seg::qkv},
      {"rope", Seg::qkv},
      {"attention_core", Seg::attn},
      {"attention_scores", Seg::attn},
      {"softmax", Seg::attn},
      {"attention_values", Seg::attn},
      {"out_proj", Seg::out},
      {"attention_dropout", Seg::mid},
      {"attention_residual", Seg::mid},
      {"post_attention_norm", Seg::mid},
      {"router", Seg::mid},
      {"moe_dispatch", Seg::mid},
      {"moe_combine", Seg::end},
      {"mlp_dropout", Seg::end},
      {"mlp_residual", Seg::end},
      {"moe_residual", Seg::end},
  };
  const auto it = kSeg.find(op.name);
  return it == kSeg.end() ? Seg::mlp : it->second;  // MLP, expert and shared-expert GEMMs
}

namespace {

void add(SegmentCost& s, const Kernel& k, const ComputeModel& cm, double model_flops,
         double slowdown) {
  if (k.empty()) return;
  s.time += Time::from_seconds_ceil(cm.seconds(k) * slowdown);
  s.model_flops += model_flops;
  s.hardware_flops += k.flops;
}

}  // namespace

LayerPlan plan_layer(const std::vector<OpSpec>& ops, const ComputeModel& cm, bool moe,
                     bool shared_experts, double expert_slowdown) {
  LayerPlan p;
  p.moe = moe;
  p.tp_reduce_after_mlp = !moe || shared_experts;
  for (const auto& op : ops) {
    const auto i = static_cast<std::size_t>(segment_of(op));
    const double slow =
        op.role == TpRole::expert && op.forward.kind == KernelKind::gemm ? expert_slowdown : 1.0;
    add(p.forward[i], op.forward, cm, op.model_flops, slow);
    // Backward is twice the forward's model FLOPs: dgrad and wgrad halves for GEMMs with
    // weights, all in dgrad otherwise (attention).
    const bool has_w = !op.backward_weight.empty();
    add(p.dgrad[i], op.backward_input, cm, has_w ? op.model_flops : 2 * op.model_flops, slow);
    add(p.wgrad[i], op.backward_weight, cm, op.model_flops, slow);
    (op.expert_weights ? p.expert_params : p.dense_params) += op.weight_params;
    p.saved_bytes += op.saved_bytes + op.score_bytes;
  }
  return p;
}

EndCost plan_end(const std::vector<OpSpec>& ops, const ComputeModel& cm) {
  EndCost e;
  for (const auto& op : ops) {
    const bool has_w = !op.backward_weight.empty();
    add(e.forward, op.forward, cm, op.model_flops, 1.0);
    add(e.dgrad, op.backward_input, cm, has_w ? op.model_flops : 2 * op.model_flops, 1.0);
    add(e.wgrad, op.backward_weight, cm, op.model_flops, 1.0);
    e.params += op.weight_params;
  }
  return e;
}

}  // namespace meshsim
