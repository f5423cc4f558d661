#pragma once
// A transformer architecture: dense decoders (GPT, Llama and its relatives) and mixtures of
// experts (Mixtral, DeepSeek-V3 with multi-head latent attention).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshsim {

// SwiGLU: silu(gate) · up, three projections. GELU and squared ReLU (relu2: relu(x)², Nemotron-4,
// Primer) are one up and one down projection around an elementwise activation, priced alike.
enum class Activation { gelu, swiglu, relu2 };
enum class Norm { layernorm, rmsnorm };
enum class Positions { learned, rope };

std::string_view name_of(Activation a);
std::string_view name_of(Norm n);
std::string_view name_of(Positions p);

struct MoeSpec {
  std::int64_t experts = 0;             // routed experts per MoE layer
  std::int64_t top_k = 0;               // routed experts per token
  std::int64_t expert_ffn = 0;          // intermediate size of one routed expert
  std::int64_t shared_experts = 0;      // always-active experts, each of expert_ffn
  std::int64_t first_dense_layers = 0;  // DeepSeek's first_k_dense_replace
  // Every `layer_step`-th layer after those is an MoE layer, the others dense (Llama 4's
  // interleave_moe_layer_step: layers step − 1, 2·step − 1, ...; Maverick 2, Scout 1).
  std::int64_t layer_step = 1;
  // Group-limited routing (DeepSeek-V2 §2.1.3 "device-limited routing", V3 §2.1.2 "node-limited
  // routing"; HF n_group / topk_group): the experts form `groups` equal groups and a token's
  // top_k experts come from its best `group_limit` groups. 1 / 1: no limit.
  std::int64_t groups = 1;
  std::int64_t group_limit = 1;
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values pass through low-rank
// projections; the cache holds the compressed KV (kv_lora_rank) plus the shared RoPE key.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

struct ModelSpec {
  std::string name;
  std::string file;
  std::string format;  // "hf:<model_type>", "gpt" or "params"
  // The Hugging Face id an engine or tokenizer loads ("meta-llama/Llama-3.1-70B"): a config's
  // `_name_or_path`, which transformers writes when it saves one; empty when not known.
  std::string hf_id;

  // A model known only by its parameter count (the seed's "a 70B model"): enough for the model
  // state in memory, not for activations, FLOPs or kernels.
  std::optional<double> declared_params;

  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;  // dense MLP intermediate size
  std::int64_t vocab = 0;
  std::int64_t max_positions = 0;
  Activation activation = Activation::swiglu;
  Norm norm = Norm::rmsnorm;
  Positions positions = Positions::rope;
  double rope_theta = 10000;  // RoPE base (HF rope_theta; 10,000 is its default and Megatron's)
  bool tied_embeddings = false;
  bool bias = false;      // GPT-2/3: biases on every linear layer and LayerNorm
  bool dropout = false;   // GPT training recipes (Megatron: 0.1); Llama recipes train without
  bool qkv_bias = false;  // Qwen2: biases on the Q, K and V projections only
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;

  bool has_architecture() const { return !declared_params.has_value(); }
  bool is_moe_layer(std::int64_t layer) const {
    return moe.has_value() && layer >= moe->first_dense_layers &&
           (layer - moe->first_dense_layers) % moe->layer_step == moe->layer_step - 1;
  }
  std::int64_t moe_layers() const {
    return moe ? (layers - moe->first_dense_layers) / moe->layer_step : 0;
  }
};

}  // namespace meshsim
