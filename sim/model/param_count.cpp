#include "model/param_count.hpp"

#include "core/units.hpp"

namespace meshsim {
namespace {

double routed_expert_params(const ModelSpec& m) {
  return as_double(m.moe->experts) * mlp_params(m, m.moe->expert_ffn);
}

double moe_fixed_params(const ModelSpec& m) {  // router and shared experts
  return as_double(m.hidden) * as_double(m.moe->experts) +
         as_double(m.moe->shared_experts) * mlp_params(m, m.moe->expert_ffn);
}

}  // namespace

double norm_params(const ModelSpec& m) {
  return m.norm == Norm::layernorm ? 2.0 * as_double(m.hidden)
                                   : as_double(m.hidden);  // LayerNorm: gain + bias
}

double attention_params(const ModelSpec& m) {
  const double h = as_double(m.hidden), a = as_double(m.heads);
  if (m.mla) {
    // DeepSeek-V2 §2.1: W_DQ (h×q_lora) + norm + W_UQ/W_QR (q_lora × heads·(nope+rope));
    // W_DKV/W_KR (h × (kv_lora + rope)) + norm + W_UK/W_UV (kv_lora × heads·(nope + v));
    // W_O (heads·v × h).
    const auto& x = *m.mla;
    const double qk = as_double(x.qk_nope_head_dim + x.qk_rope_head_dim);
    const double q = x.q_lora_rank > 0 ? h * as_double(x.q_lora_rank) + as_double(x.q_lora_rank) +
                                             as_double(x.q_lora_rank) * a * qk
                                       : h * a * qk;
    const double kv = h * as_double(x.kv_lora_rank + x.qk_rope_head_dim) +
                      as_double(x.kv_lora_rank) +
                      as_double(x.kv_lora_rank) * a * as_double(x.qk_nope_head_dim + x.v_head_dim);
    return q + kv + a * as_double(x.v_head_dim) * h;
  }
  const double q_dim = a * as_double(m.head_dim),
               kv_dim = as_double(m.kv_heads) * as_double(m.head_dim);
  double p = h * (q_dim + 2 * kv_dim) + q_dim * h;
  if (m.bias)
    p += q_dim + 2 * kv_dim + h;
  else if (m.qkv_bias)
    p += q_dim + 2 * kv_dim;
  return p;
}

double mlp_params(const ModelSpec& m, std::int64_t ffn) {
  const double h = as_double(m.hidden), f = as_double(ffn);
  if (m.activation == Activation::swiglu) return 3 * h * f;  // gate, up, down
  return 2 * h * f + (m.bias ? f + h : 0.0);
}

double layer_params(const ModelSpec& m, std::int64_t layer) {
  const double common = attention_params(m) + 2 * norm_params(m);
  if (!m.is_moe_layer(layer)) return common + mlp_params(m, m.ffn);
  return common + moe_fixed_params(m) + routed_expert_params(m);
}

double layer_params_on_rank(const ModelSpec& m, std::int64_t layer, std::int64_t expert_parallel) {
  if (!m.is_moe_layer(layer) || expert_parallel <= 1) return layer_params(m, layer);
  return layer_params(m, layer) -
         routed_expert_params(m) * (1.0 - 1.0 / as_double(expert_parallel));
}

double layer_active_params(const ModelSpec& m, std::int64_t layer) {
  if (!m.is_moe_layer(layer)) return layer_params(m, layer);
  return attention_params(m) + 2 * norm_params(m) + moe_fixed_params(m) +
         as_double(m.moe->top_k) * mlp_params(m, m.moe->expert_ffn);
}

ParamCount count_params(const ModelSpec& m) {
  ParamCount c;
  if (m.declared_params) {
    c.total = c.active = *m.declared_params;
    return c;
  }
  c.embedding = as_double(m.vocab) * as_double(m.hidden);
  if (m.positions == Positions::learned)
    c.embedding += as_double(m.max_positions) * as_double(m.hidden);
  c.output = m.tied_embeddings ? 0.0 : as_double(m.vocab) * as_double(m.hidden);
  const double ends = c.embedding + c.output + norm_params(m);  // final norm
  c.total = c.active = ends;
  for (std::int64_t l = 0; l < m.layers; ++l) {
    c.total += layer_params(m, l);
    c.active += layer_active_params(m, l);
  }
  if (m.moe) c.routed_experts = as_double(m.moe_layers()) * routed_expert_params(m);
  return c;
}

}  // namespace meshsim
