#include "strategy/layer_plan.hpp"

#include <algorithm>
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

SegmentCost& operator+=(SegmentCost& a, const SegmentCost& b) {
  a.time += b.time;
  a.interfered += b.interfered;
  a.model_flops += b.model_flops;
  a.hardware_flops += b.hardware_flops;
  a.hbm_s += b.hbm_s;
  a.kernels += b.kernels;
  return a;
}

double hbm_achievable_Bps(const ComputeModel& cm) {
  return cm.gpu().hbm_Bps * cm.params().of(MemoryClass::elementwise).bandwidth_fraction;
}

namespace {

// One kernel's time alone and beside a collective. Only compute-bound kernels lose to the
// collective's SMs (fewer SMs, and the wave quantization of the rest: the tail effect of
// software-stacks.md §2.2); the factor comes from the model alone, so a measured-point
// correction carries over unchanged.
void add_kernel(SegmentCost& s, const Kernel& k, const PlanPricing& p, double slowdown) {
  if (k.empty()) return;
  const double t = p.cm.seconds(k) * slowdown;
  double ti = t;
  if (p.interfered && k.kind != KernelKind::memory_bound) {
    const double alone = p.cm.model_seconds(k);
    if (alone > 0) ti = t * std::max(1.0, p.interfered->model_seconds(k) / alone);
  }
  // The measured gap before the next kernel of the stream (0 unless a profile measured it).
  const double gap = p.cm.kernel_gap_s();
  s.time += Time::from_seconds_ceil(t + gap);
  s.interfered += Time::from_seconds_ceil(ti + gap);
  s.hardware_flops += k.flops;
  s.hbm_s += k.bytes * slowdown / hbm_achievable_Bps(p.cm);
  s.kernels += 1;
}

}  // namespace

bool runs_as_parts(const OpSpec& op, const Stack& stack) {
  return op.forward.kind == KernelKind::gemm && !op.gemm_parts.empty() && stack.unfused(op.name);
}

namespace {

// A pass of an op: its kernel, or the stack's split of it.
SegmentCost pass_cost(const OpSpec& op, const Kernel& k, int pass, const PlanPricing& p,
                      double slowdown) {
  SegmentCost s;
  if (k.empty()) return s;
  if (k.kind == KernelKind::gemm && runs_as_parts(op, p.stack)) {
    for (const auto& [part, columns] : op.gemm_parts) {
      const auto pk = gemm_part_kernels(op, columns);
      add_kernel(s,
                 pass == 0   ? pk.forward
                 : pass == 1 ? pk.backward_input
                             : pk.backward_weight,
                 p, slowdown);
    }
    return s;
  }
  const OpKernels* split =
      k.kind == KernelKind::memory_bound ? p.stack.kernels_of(op.name) : nullptr;
  if (!split || pass == 2) {
    add_kernel(s, k, p, slowdown);
    return s;
  }
  // An eager op: n kernels sharing its bytes × factor, each with its class's fixed cost.
  const int n = pass == 0 ? split->forward_kernels : split->backward_kernels;
  const double f = pass == 0 ? split->forward_bytes_factor : split->backward_bytes_factor;
  const Kernel each =
      memory_kernel(split->kernel_class.value_or(k.memory_class), k.bytes * f / n, k.flops / n);
  for (int i = 0; i < n; ++i) add_kernel(s, each, p, slowdown);
  return s;
}

bool is_tp_gemm(const OpSpec& op) {
  return op.forward.kind == KernelKind::gemm &&
         (op.role == TpRole::column_parallel || op.role == TpRole::row_parallel);
}

bool listed(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

}  // namespace

Fp8CastKernels fp8_cast_kernels(const OpSpec& op, const Stack& stack, std::int64_t tp, bool sp,
                                bool fsdp) {
  Fp8CastKernels out;
  if (op.forward.kind != KernelKind::gemm || op.forward.dtype != DType::fp8) return out;
  const Fp8Casts* casts = stack.fp8_casts_of(op.name);
  if (!casts) return out;
  const auto& g = op.forward.gemm;
  const double batch = static_cast<double>(g.batch);
  const double input = batch * static_cast<double>(g.m) * static_cast<double>(g.k);
  const double grad = batch * static_cast<double>(g.m) * static_cast<double>(g.n);
  const double weight = batch * static_cast<double>(g.k) * static_cast<double>(g.n);
  // Assumption (README): the amax, cast and transpose kernels stream at the elementwise
  // class's fitted bandwidth; nothing in ../shared/measurements/ measures them.
  const auto cast = [&](bool forward, double bytes, std::string_view label) {
    if (bytes <= 0) return;
    (forward ? out.forward : out.dgrad).push_back(memory_kernel(MemoryClass::elementwise, bytes));
    (forward ? out.forward_labels : out.dgrad_labels).push_back(label);
  };
  const auto quantize = [&](bool forward, Fp8Cast c, double elements, bool of_weight) {
    const auto per_kernel = kernel_bytes_per_element(c);
    for (std::size_t i = 0; i < per_kernel.size(); ++i) {
      const bool amax = per_kernel.size() > 1 && i == 0;
      cast(forward, per_kernel[i] * elements,
           of_weight ? (amax ? "weight_amax" : "weight_cast") : (amax ? "amax" : "cast"));
    }
  };
  // A tensor gathered by a sequence-parallel all-gather that moves FP8 is quantized on the
  // local shard before the gather (its amax too: the scale's all-reduce of one value is not
  // priced) and transposed once gathered. In an MoE layer (shared experts) that gather keeps 16
  // bits (Stack::fp8_tp_all_gathers), so the gathered tensor is cast whole.
  const bool fp8_gathered = sp && tp > 1 && stack.fp8_tp_all_gathers && op.block != "moe";
  const auto quantize_gathered = [&](bool forward, Fp8Cast c, double elements) {
    if (!fp8_gathered || (c != Fp8Cast::cast_transpose && c != Fp8Cast::amax_cast_transpose)) {
      quantize(forward, c, elements, false);
      return;
    }
    constexpr double kCastOnly = 2 + 1;  // the FP8 copy alone, no transpose
    const double shard = elements / static_cast<double>(tp);
    if (const auto per_kernel = kernel_bytes_per_element(c); per_kernel.size() > 1)
      cast(forward, per_kernel.front() * shard, "amax");  // a dynamic scale's reduction
    cast(forward, kCastOnly * shard, "cast");
    cast(forward, bytes_per_element(Fp8Cast::transpose) * elements, "cast");
  };
  if (fsdp && stack.fp8_fsdp_all_gather != Fp8FsdpAllGather::none && is_fp8_linear(op)) {
    // torchao's float8 all-gather: FSDP gathered the weight in FP8, cast on each shard before
    // the gather (trace_builder's gather_layer prices that cast): forward's GEMM reads it as its
    // column-major second operand, and dgrad's needs its transpose, a copy of one-byte elements
    // in backward. (FP8 parameters, Stack::fp8_params, keep the stack's listed weight casts:
    // Transformer Engine's once a step, not priced.)
    if (!op.backward_input.empty())
      cast(false, bytes_per_element(Fp8Cast::transpose) * weight, "weight_transpose");
  } else {
    quantize(true, casts->weight, weight, true);
  }
  // A column-parallel GEMM's input arrives by that all-gather (torchao's
  // PrepareFloat8ModuleInput); Transformer Engine's fused norm already wrote it in FP8, so
  // megatron lists `transpose` for those inputs.
  if (op.role == TpRole::column_parallel)
    quantize_gathered(true, casts->input, input);
  else
    quantize(true, casts->input, input, false);
  if (op.backward_input.empty()) return out;
  // A row-parallel GEMM's output gradient arrives by that all-gather.
  if (op.role == TpRole::row_parallel)
    quantize_gathered(false, casts->output_grad, grad);
  else
    quantize(false, casts->output_grad, grad, false);
  return out;
}

OpKernelCost price_op(const OpSpec& op, const PlanPricing& p, double slowdown) {
  OpKernelCost c;
  c.forward = pass_cost(op, op.forward, 0, p, slowdown);
  c.dgrad = pass_cost(op, op.backward_input, 1, p, slowdown);
  c.wgrad = pass_cost(op, op.backward_weight, 2, p, slowdown);
  const auto casts = fp8_cast_kernels(op, p.stack, p.tp, p.sp, p.fsdp);
  for (const auto& k : casts.forward) add_kernel(c.forward, k, p, slowdown);
  for (const auto& k : casts.dgrad) add_kernel(c.dgrad, k, p, slowdown);
  // Backward is twice the forward's model FLOPs: dgrad and wgrad halves for GEMMs with
  // weights, all in dgrad otherwise (attention).
  const bool has_w = !op.backward_weight.empty();
  if (!op.forward.empty()) c.forward.model_flops = op.model_flops;
  if (!op.backward_input.empty()) c.dgrad.model_flops = has_w ? op.model_flops : 2 * op.model_flops;
  if (has_w) c.wgrad.model_flops = op.model_flops;
  return c;
}

LayerPlan plan_layer(const std::vector<OpSpec>& ops, const PlanPricing& pricing, bool moe,
                     bool shared_experts, double expert_slowdown) {
  LayerPlan p;
  p.moe = moe;
  p.tp_reduce_after_mlp = !moe || shared_experts;
  const auto resolved = resolve_recompute(ops, pricing.recompute);
  const auto& recompute = resolved.ops;
  for (const auto& op : ops) {
    const auto i = static_cast<std::size_t>(segment_of(op));
    const double slow =
        op.role == TpRole::expert && op.forward.kind == KernelKind::gemm ? expert_slowdown : 1.0;
    const auto c = price_op(op, pricing, slow);
    p.forward[i] += c.forward;
    p.dgrad[i] += c.dgrad;
    p.wgrad[i] += c.wgrad;
    if (op.name == "moe_dispatch")
      p.recompute_dispatch = listed(resolved.ops_with_collectives, op.name);
    if (op.name == "moe_combine")
      p.recompute_combine = listed(resolved.ops_with_collectives, op.name);
    if (listed(recompute, op.name)) {
      p.recompute += c.forward;
    } else {
      for (const auto& [part, columns] : op.gemm_parts)
        if (listed(recompute, op.name + "." + part)) {
          SegmentCost one;
          add_kernel(one, gemm_part_kernels(op, columns).forward, pricing, slow);
          one.model_flops = one.hardware_flops;
          p.recompute += one;
        }
    }
    if (is_tp_gemm(op)) {
      std::vector<TpGemm> as_run;
      if (runs_as_parts(op, pricing.stack)) {
        for (const auto& [part, columns] : op.gemm_parts) {
          const auto pk = gemm_part_kernels(op, columns);
          as_run.push_back(
              {op.name + "." + part, op.role, pk.forward, pk.backward_input, pk.backward_weight});
        }
      } else {
        as_run.push_back({op.name, op.role, op.forward, op.backward_input, op.backward_weight});
      }
      // A whole op re-run by a checkpoint that re-runs its collectives: one gather or reduction
      // per op, however many GEMMs it runs as (TE's fc1 gathers once for gate and up).
      if (pricing.tp > 1 && listed(resolved.ops_with_collectives, op.name)) {
        p.recompute_tp_gemms.insert(p.recompute_tp_gemms.end(), as_run.begin(), as_run.end());
        ++(op.role == TpRole::column_parallel ? p.recompute_gathers : p.recompute_reductions);
      }
      p.tp_gemms[i].insert(p.tp_gemms[i].end(), as_run.begin(), as_run.end());
    }
    (op.expert_weights ? p.expert_params : p.dense_params) += op.weight_params;
    if (fsdp_gathers_fp8(pricing.stack, op)) p.fp8_gathered_params += op.weight_params;
    p.saved_bytes += op.saved_bytes + op.score_bytes;
  }
  return p;
}

EndCost plan_end(const std::vector<OpSpec>& ops, const PlanPricing& pricing) {
  EndCost e;
  for (const auto& op : ops) {
    const auto c = price_op(op, pricing);
    e.forward += c.forward;
    e.dgrad += c.dgrad;
    e.wgrad += c.wgrad;
    e.params += op.weight_params;
  }
  return e;
}

}  // namespace meshsim
