#include "model/op_catalogue.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"
#include "model/param_count.hpp"

namespace meshsim {

std::string_view name_of(TpRole r) {
  switch (r) {
    case TpRole::replicated:
      return "replicated";
    case TpRole::column_parallel:
      return "column_parallel";
    case TpRole::row_parallel:
      return "row_parallel";
    case TpRole::sharded_core:
      return "sharded_core";
    case TpRole::expert:
      return "expert";
  }
  return "?";
}

namespace {

constexpr double kAct = 2.0;   // bytes per activation element (16-bit, Korthikanti et al.)
constexpr double kMask = 1.0;  // bytes per dropout-mask element

std::int64_t ceil_i(double v) {
  return static_cast<std::int64_t>(std::ceil(v - 1e-9));
}

// Token counts of one rank. T: tokens of this CP rank's chunk for the whole TP group (b·s/cp);
// Ts: tokens in the sequence region (norms, dropouts, residuals), T/t with SP.
struct Ctx {
  const ModelSpec& m;
  LayerShape shape;
  Sharding sh;
  double T = 0, Ts = 0;
  std::int64_t Ti = 0;

  Ctx(const ModelSpec& model, const LayerShape& s, const Sharding& sharding)
      : m(model), shape(s), sh(sharding) {
    if (!m.has_architecture())
      throw Error(m.file, "",
                  "model '" + m.name +
                      "' is given by its parameter count only; ops, FLOPs and "
                      "activations need an architecture");
    if (sh.tp < 1 || sh.cp < 1 || sh.ep < 1 || shape.micro_batch < 1 || shape.seq < 1)
      throw Error("", "", "op catalogue: degrees, micro-batch and sequence must be positive");
    T = as_double(shape.micro_batch) * as_double(shape.seq) / as_double(sh.cp);
    Ts = sh.sp ? T / as_double(sh.tp) : T;
    Ti = ceil_i(T);
  }
  double h() const { return as_double(m.hidden); }
  double t() const { return as_double(sh.tp); }
  // Heads of this rank: query heads split evenly; KV heads split while there are enough of them,
  // replicated once there are fewer KV heads than TP ranks (Megatron's GQA rule).
  std::int64_t heads() const { return m.heads / sh.tp; }
  std::int64_t kv_heads() const { return m.kv_heads >= sh.tp ? m.kv_heads / sh.tp : 1; }
};

OpSpec gemm_op(std::string name, std::string block, TpRole role, std::int64_t M, std::int64_t N,
               std::int64_t K, DType dt, double saved, double weights, std::int64_t batch = 1) {
  OpSpec op;
  op.name = std::move(name);
  op.block = std::move(block);
  op.role = role;
  op.forward = gemm_kernel({M, N, K, batch}, dt);
  op.backward_input = gemm_kernel({M, K, N, batch}, dt);   // dX = dY · Wᵀ
  op.backward_weight = gemm_kernel({K, N, M, batch}, dt);  // dW = Xᵀ · dY
  op.model_flops = 2.0 * as_double(M) * as_double(N) * as_double(K) * as_double(batch);
  op.saved_bytes = saved;
  op.saved_input_bytes = saved;
  op.weight_params = weights;
  return op;
}

OpSpec memory_op(std::string name, std::string block, MemoryClass cls, double forward_bytes,
                 double backward_bytes, double saved, double weights = 0) {
  OpSpec op;
  op.name = std::move(name);
  op.block = std::move(block);
  op.forward = memory_kernel(cls, forward_bytes);
  if (backward_bytes > 0) op.backward_input = memory_kernel(cls, backward_bytes);
  op.saved_bytes = saved;
  op.saved_input_bytes = saved;
  op.weight_params = weights;
  return op;
}

// LayerNorm/RMSNorm over Ts tokens: forward reads x, writes y; backward reads x and dy, writes
// dx. Its input is saved.
OpSpec norm_op(const Ctx& c, std::string name, std::string block) {
  const double elems = c.Ts * c.h();
  return memory_op(std::move(name), std::move(block), MemoryClass::norm, 2 * kAct * elems,
                   3 * kAct * elems, kAct * elems, norm_params(c.m));
}

// Dropout on the residual branch: saves its 1-byte mask.
OpSpec dropout_op(const Ctx& c, std::string name, std::string block) {
  const double elems = c.Ts * c.h();
  return memory_op(std::move(name), std::move(block), MemoryClass::elementwise,
                   (2 * kAct + kMask) * elems, (2 * kAct + kMask) * elems, kMask * elems);
}

OpSpec residual_op(const Ctx& c, std::string name, std::string block) {
  const double elems = c.Ts * c.h();
  return memory_op(std::move(name), std::move(block), MemoryClass::elementwise, 3 * kAct * elems,
                   3 * kAct * elems, 0);
}

void add_attention(const Ctx& c, std::vector<OpSpec>& ops) {
  const auto& m = c.m;
  const DType dt = c.shape.dtype;
  const double h = c.h(), T = c.T, Ts = c.Ts;
  const std::int64_t a = c.heads(), kv = c.kv_heads();
  std::int64_t d_qk = m.head_dim, d_v = m.head_dim;
  ops.push_back(norm_op(c, "input_norm", "attention"));
  if (m.mla) {
    // Down-projections are replicated over TP, up-projections column-parallel (Megatron-Core
    // MLA). Inputs of each projection are saved.
    const auto& x = *m.mla;
    d_qk = x.qk_nope_head_dim + x.qk_rope_head_dim;
    d_v = x.v_head_dim;
    const std::int64_t kv_down = x.kv_lora_rank + x.qk_rope_head_dim;
    if (x.q_lora_rank > 0) {
      ops.push_back(gemm_op("q_down_proj", "attention", TpRole::replicated, c.Ti, x.q_lora_rank,
                            m.hidden, dt, kAct * Ts * h,
                            h * as_double(x.q_lora_rank) + as_double(x.q_lora_rank)));
      ops.push_back(gemm_op("q_up_proj", "attention", TpRole::column_parallel, c.Ti, a * d_qk,
                            x.q_lora_rank, dt, kAct * T * as_double(x.q_lora_rank),
                            as_double(x.q_lora_rank) * as_double(a * d_qk)));
    } else {
      ops.push_back(gemm_op("q_proj", "attention", TpRole::column_parallel, c.Ti, a * d_qk,
                            m.hidden, dt, kAct * Ts * h, h * as_double(a * d_qk)));
    }
    ops.push_back(gemm_op("kv_down_proj", "attention", TpRole::replicated, c.Ti, kv_down, m.hidden,
                          dt, x.q_lora_rank > 0 ? 0.0 : kAct * Ts * h,
                          h * as_double(kv_down) + as_double(x.kv_lora_rank)));
    ops.push_back(
        gemm_op("kv_up_proj", "attention", TpRole::column_parallel, c.Ti,
                a * (x.qk_nope_head_dim + x.v_head_dim), x.kv_lora_rank, dt,
                kAct * T * as_double(x.kv_lora_rank),
                as_double(x.kv_lora_rank) * as_double(a * (x.qk_nope_head_dim + x.v_head_dim))));
  } else {
    const std::int64_t n = (a + 2 * kv) * m.head_dim;
    double weights = h * as_double(n);
    if (m.bias || m.qkv_bias) weights += as_double(n);
    ops.push_back(gemm_op("qkv_proj", "attention", TpRole::column_parallel, c.Ti, n, m.hidden, dt,
                          kAct * Ts * h, weights));
    ops.back().gemm_parts = {{"q", a * m.head_dim}, {"k", kv * m.head_dim}, {"v", kv * m.head_dim}};
  }
  if (m.positions == Positions::rope) {
    const double elems = T * as_double(a * d_qk + kv * d_qk);
    ops.push_back(
        memory_op("rope", "attention", MemoryClass::rotary, 2 * kAct * elems, 2 * kAct * elems, 0));
  }

  const std::int64_t b = c.shape.micro_batch;
  const std::int64_t sq = c.Ti / std::max<std::int64_t>(b, 1), skv = c.shape.seq;
  const double q_bytes = kAct * T * as_double(a * d_qk), k_bytes = kAct * T * as_double(kv * d_qk),
               v_bytes = kAct * T * as_double(kv * d_v);
  const double model_flops =
      2.0 * as_double(b) * as_double(sq) * as_double(skv) * as_double(a) * as_double(d_qk + d_v);
  // Attention runs 16-bit in FP8 training (Transformer Engine's FP8 recipe quantizes the linear
  // layers; FP8 attention is a separate opt-in, fp8_dpa, off by default).
  const DType adt = unquantized_dtype(dt);
  if (c.shape.flash_attention) {
    OpSpec core;
    core.name = "attention_core";
    core.block = "attention";
    core.role = TpRole::sharded_core;
    AttentionShape s{b, sq, skv, a, (d_qk + d_v) / 2, kv, c.shape.causal, false};
    // Under CP a rank's queries are two load-balanced chunks of the sequence (the 2·cp split
    // parallel/mesh_rules.cpp asks for), not its last s/cp positions.
    s.balanced = c.shape.causal && c.sh.cp > 1;
    core.forward = attention_kernel(s, adt);
    s.backward = true;
    core.backward_input = attention_kernel(s, adt);
    core.model_flops = model_flops;
    // Q, K, V and the fp32 log-sum-exp per query and head (FlashAttention-2); the output is
    // saved by the output projection that consumes it.
    core.saved_bytes = q_bytes + k_bytes + v_bytes + 4.0 * T * as_double(a);
    core.saved_input_bytes = q_bytes + k_bytes + v_bytes;
    ops.push_back(core);
  } else {
    // Unfused attention (Megatron's core attention before flash): two batched GEMMs around a
    // softmax (and dropout) that materialise b·heads·s_q·s_kv scores; causal masks do not save
    // work here. Saved tensors as Korthikanti et al. §4.1: Q and K for QKᵀ; softmax output,
    // dropout mask and dropout output (or only the softmax output without dropout); V.
    const double scores = as_double(b) * as_double(a) * as_double(sq) * as_double(skv);
    auto qk = gemm_op("attention_scores", "attention", TpRole::sharded_core, sq, skv, d_qk, adt,
                      q_bytes + k_bytes, 0, b * a);
    qk.backward_weight = {};
    qk.backward_input.flops *= 2;  // gradients of both Q and K
    qk.backward_input.bytes *= 2;
    ops.push_back(qk);
    const double softmax_io = (m.dropout ? 3 * kAct + kMask : 2 * kAct) * scores;
    auto softmax =
        memory_op("softmax", "attention", MemoryClass::softmax, softmax_io, softmax_io, 0);
    softmax.role = TpRole::sharded_core;
    softmax.score_bytes = (m.dropout ? kAct + kMask : kAct) * scores;
    ops.push_back(softmax);
    auto pv = gemm_op("attention_values", "attention", TpRole::sharded_core, sq, d_v, skv, adt,
                      v_bytes, 0, b * a);
    pv.backward_weight = {};
    pv.backward_input.flops *= 2;  // gradients of both P and V
    pv.backward_input.bytes *= 2;
    pv.score_bytes = m.dropout ? kAct * scores : 0.0;
    ops.push_back(pv);
  }
  double out_weights = as_double(a * d_v) * h;
  if (m.bias) out_weights += h;
  ops.push_back(gemm_op("out_proj", "attention", TpRole::row_parallel, c.Ti, m.hidden, a * d_v, dt,
                        kAct * T * as_double(a * d_v), out_weights));
  if (m.dropout) ops.push_back(dropout_op(c, "attention_dropout", "attention"));
  ops.push_back(residual_op(c, "attention_residual", "attention"));
}

// A dense MLP (or shared experts) over `tokens` tokens with `ffn_rank` intermediate columns on
// this rank.
void add_mlp(const Ctx& c, std::vector<OpSpec>& ops, const std::string& prefix,
             const std::string& block, double tokens, std::int64_t ffn_rank, TpRole up_role,
             TpRole down_role, double up_saved_input) {
  const auto& m = c.m;
  const DType dt = c.shape.dtype;
  const double h = c.h(), f = as_double(ffn_rank);
  const std::int64_t M = ceil_i(tokens);
  const bool gated = m.activation == Activation::swiglu;
  const std::int64_t up_n = gated ? 2 * ffn_rank : ffn_rank;
  double up_w = h * as_double(up_n), down_w = f * h;
  if (m.bias) {
    up_w += as_double(up_n);
    down_w += h;
  }
  ops.push_back(
      gemm_op(prefix + "_up", block, up_role, M, up_n, m.hidden, dt, up_saved_input, up_w));
  if (gated) ops.back().gemm_parts = {{"gate", ffn_rank}, {"up", ffn_rank}};
  // GELU saves its input (4h wide for GPT: the "8sbh" of Korthikanti); SwiGLU saves the gate and
  // up outputs it multiplies.
  const double in_elems = tokens * as_double(up_n), out_elems = tokens * f;
  auto act =
      memory_op(prefix + "_activation", block, MemoryClass::activation,
                kAct * (in_elems + out_elems), kAct * (2 * in_elems + out_elems), kAct * in_elems);
  act.role = up_role;
  ops.push_back(act);
  ops.push_back(gemm_op(prefix + "_down", block, down_role, M, m.hidden, ffn_rank, dt,
                        kAct * out_elems, down_w));
}

void add_moe(const Ctx& c, std::vector<OpSpec>& ops) {
  const auto& m = c.m;
  const auto& moe = *m.moe;
  const DType dt = c.shape.dtype;
  const double h = c.h();
  // MoE layers work on the sequence-parallel share of the tokens (T/t).
  const double tokens = c.T / c.t();
  const std::int64_t E = moe.experts;
  ops.push_back(norm_op(c, "post_attention_norm", "moe"));
  ops.back().saved_bytes = ops.back().saved_input_bytes = kAct * tokens * h;
  // Router: a replicated h×E GEMM, then softmax/top-k; its input and fp32 probabilities saved.
  // 16-bit in FP8 runs: Megatron-Core's TopKRouter is a plain torch linear outside Transformer
  // Engine (moe/router.py), and torchtitan's float8 MoE conversion covers the experts only.
  ops.push_back(gemm_op("router", "moe", TpRole::replicated, ceil_i(tokens), E, m.hidden,
                        unquantized_dtype(dt), kAct * tokens * h + 4.0 * tokens * as_double(E),
                        h * as_double(E)));
  ops.back().saved_input_bytes = kAct * tokens * h;
  const double routed =
      tokens * as_double(moe.top_k);  // token copies this rank sends (and receives)
  ops.push_back(memory_op("moe_dispatch", "moe", MemoryClass::gather, 2 * kAct * routed * h,
                          2 * kAct * routed * h, 0));
  ops.back().role = TpRole::expert;
  // Balanced routing: each of the E/ep local experts gets routed·ep/E... tokens from the EP group,
  // i.e. `routed` tokens in all on this rank.
  const std::int64_t local = std::max<std::int64_t>(E / c.sh.ep, 1);
  // Only experts that receive a token run (and have their weights read): the EP group's
  // tokens·ep tokens each pick top_k of E experts, so under uniform routing an expert stays idle
  // with probability (1 − k/E)^(tokens·ep). At decode batch sizes a few experts are active; at
  // training sizes all of them.
  const double idle =
      std::pow(1.0 - as_double(moe.top_k) / as_double(E), tokens * as_double(c.sh.ep));
  const std::int64_t active =
      std::clamp<std::int64_t>(ceil_i(as_double(local) * (1.0 - idle)), 1, local);
  const double per_expert = routed / as_double(active);
  const bool gated = m.activation == Activation::swiglu;
  const std::int64_t up_n = gated ? 2 * moe.expert_ffn : moe.expert_ffn;
  const std::int64_t M = ceil_i(per_expert);
  const DType expert_dt = c.shape.fp8_routed_experts ? dt : unquantized_dtype(dt);
  auto up = gemm_op("expert_up", "moe", TpRole::expert, M, up_n, m.hidden, expert_dt,
                    kAct * routed * h, as_double(local) * h * as_double(up_n), active);
  up.expert_weights = true;
  ops.push_back(up);
  const double in_elems = routed * as_double(up_n), out_elems = routed * as_double(moe.expert_ffn);
  auto act =
      memory_op("expert_activation", "moe", MemoryClass::activation, kAct * (in_elems + out_elems),
                kAct * (2 * in_elems + out_elems), kAct * in_elems);
  act.role = TpRole::expert;
  ops.push_back(act);
  auto down = gemm_op("expert_down", "moe", TpRole::expert, M, m.hidden, moe.expert_ffn, expert_dt,
                      kAct * out_elems, as_double(local) * as_double(moe.expert_ffn) * h, active);
  down.expert_weights = true;
  ops.push_back(down);
  // Combine: un-permute and weight by router probabilities; the expert outputs are saved for the
  // probability gradient.
  ops.push_back(memory_op("moe_combine", "moe", MemoryClass::gather, 3 * kAct * routed * h,
                          3 * kAct * routed * h, kAct * routed * h));
  ops.back().role = TpRole::expert;
  if (moe.shared_experts > 0)
    add_mlp(c, ops, "shared_expert", "moe", c.T, moe.shared_experts * moe.expert_ffn / c.sh.tp,
            TpRole::column_parallel, TpRole::row_parallel, 0.0);
  ops.push_back(residual_op(c, "moe_residual", "moe"));
}

}  // namespace

std::vector<OpSpec> layer_ops(const ModelSpec& m, std::int64_t layer, const LayerShape& shape,
                              const Sharding& sharding) {
  const Ctx c(m, shape, sharding);
  std::vector<OpSpec> ops;
  add_attention(c, ops);
  if (m.is_moe_layer(layer)) {
    add_moe(c, ops);
    return ops;
  }
  ops.push_back(norm_op(c, "post_attention_norm", "mlp"));
  add_mlp(c, ops, "mlp", "mlp", c.T, m.ffn / sharding.tp, TpRole::column_parallel,
          TpRole::row_parallel, kAct * c.Ts * c.h());
  if (m.dropout) ops.push_back(dropout_op(c, "mlp_dropout", "mlp"));
  ops.push_back(residual_op(c, "mlp_residual", "mlp"));
  return ops;
}

std::vector<OpSpec> embedding_ops(const ModelSpec& m, const LayerShape& shape,
                                  const Sharding& sharding) {
  const Ctx c(m, shape, sharding);
  std::vector<OpSpec> ops;
  // Vocabulary-parallel lookup (rows split over TP, partial results all-reduced or
  // reduce-scattered); learned positions are replicated. Backward scatters gradients into rows.
  double weights = as_double(m.vocab) * c.h() / c.t();
  if (m.positions == Positions::learned) weights += as_double(m.max_positions) * c.h();
  auto lookup = memory_op("embedding", "embedding", MemoryClass::gather, 2 * kAct * c.T * c.h(),
                          2 * kAct * c.T * c.h(), 0, weights);
  lookup.role = TpRole::row_parallel;
  ops.push_back(lookup);
  if (m.dropout) ops.push_back(dropout_op(c, "embedding_dropout", "embedding"));
  return ops;
}

std::vector<OpSpec> head_ops(const ModelSpec& m, const LayerShape& shape,
                             const Sharding& sharding) {
  const Ctx c(m, shape, sharding);
  std::vector<OpSpec> ops;
  ops.push_back(norm_op(c, "final_norm", "head"));
  const std::int64_t v_rank = (m.vocab + sharding.tp - 1) / sharding.tp;
  // Column-parallel over the vocabulary; a tied head reuses the embedding table (its weights are
  // counted there). FP8 training keeps the output layer 16-bit: Megatron-Core builds it as
  // tensor_parallel.ColumnParallelLinear, outside Transformer Engine's FP8 modules
  // (megatron/core/models/gpt/gpt_model.py), and torchtitan's float8 converter leaves the
  // `output` linear out (Float8 `filter_fqns`), as FP8 serving checkpoints keep lm_head 16-bit.
  ops.push_back(gemm_op("logits", "head", TpRole::column_parallel, c.Ti, v_rank, m.hidden,
                        unquantized_dtype(shape.dtype), kAct * c.Ts * c.h(),
                        m.tied_embeddings ? 0.0 : as_double(v_rank) * c.h()));
  // Vocabulary-parallel cross entropy in fp32: reads the 16-bit logits, keeps fp32 softmax for
  // backward (Korthikanti et al.'s 4·s·b·v/t output-layer term), writes 16-bit gradients.
  const double logits = c.T * as_double(v_rank);
  auto loss = memory_op("loss", "head", MemoryClass::softmax, (kAct + 4.0) * logits,
                        (4.0 + kAct) * logits, 0);
  loss.role = TpRole::column_parallel;
  loss.temporary_bytes = (kAct + 4.0) * logits;
  ops.push_back(loss);
  return ops;
}

GemmPartKernels gemm_part_kernels(const OpSpec& op, std::int64_t columns) {
  const auto& f = op.forward.gemm;
  const DType dt = op.forward.dtype;
  return {gemm_kernel({f.m, columns, f.k, f.batch}, dt),
          gemm_kernel({f.m, f.k, columns, f.batch}, dt),
          gemm_kernel({f.k, columns, f.m, f.batch}, dt)};
}

OpTotals totals(const std::vector<OpSpec>& ops) {
  OpTotals t;
  for (const auto& op : ops) {
    t.model_flops += op.model_flops;
    t.saved_bytes += op.saved_bytes;
    t.score_bytes += op.score_bytes;
    t.temporary_bytes = std::max(t.temporary_bytes, op.temporary_bytes);
    t.weight_params += op.weight_params;
  }
  return t;
}

double training_flops_per_token(const ModelSpec& m, std::int64_t seq) {
  LayerShape shape;
  shape.micro_batch = 1;
  shape.seq = seq;
  const Sharding none;
  double forward = totals(embedding_ops(m, shape, none)).model_flops +
                   totals(head_ops(m, shape, none)).model_flops;
  for (std::int64_t l = 0; l < m.layers; ++l)
    forward += totals(layer_ops(m, l, shape, none)).model_flops;
  return 3.0 * forward / static_cast<double>(seq);
}

}  // namespace meshsim
