#include "model/model_loader.hpp"

#include <filesystem>
#include <set>

namespace meshsim {
namespace {

constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;  // 16M: beyond any real model

std::int64_t dim(const JsonRef& ref) {
  const auto v = ref.positive_integer();
  if (v > kMaxDim) ref.fail("is implausibly large (more than " + std::to_string(kMaxDim) + ")");
  return v;
}

// Every layer is simulated op by op (per micro-batch, per simulated rank), so the layer count
// bounds the work of a step. 16,384 is 16× the deepest published transformer (DeepNet, 1,000
// layers; Wang et al. 2022) and 128× Llama 3.1 405B's 126.
constexpr std::int64_t kMaxLayers = std::int64_t{1} << 14;

std::int64_t layers(const JsonRef& ref) {
  const auto v = ref.positive_integer();
  if (v > kMaxLayers)
    ref.fail("more than " + std::to_string(kMaxLayers) +
             " layers (meshsim simulates every layer op by op; the deepest published "
             "transformer has 1,000)");
  return v;
}

std::int64_t count(const JsonRef& ref) {  // may be zero
  const auto v = ref.integer();
  if (v < 0) ref.fail("must not be negative");
  if (v > kMaxDim) ref.fail("is implausibly large (more than " + std::to_string(kMaxDim) + ")");
  return v;
}

std::string stem_of(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

// Hugging Face configs carry dozens of keys meshsim does not need (token ids, rope scaling,
// initializer ranges...), so unknown keys are ignored here, unlike in meshsim's own formats.
class HfReader {
 public:
  explicit HfReader(const JsonRef& root) : root_(root) {}
  bool has(std::string_view key) const {
    return root_.raw().contains(key) && !root_.raw().at(std::string(key)).is_null();
  }
  JsonRef get(std::string_view key) const {
    if (!has(key)) root_.fail("missing required field '" + std::string(key) + "'");
    return root_.child(key);
  }
  std::optional<JsonRef> maybe(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    return root_.child(key);
  }
  const JsonRef& root() const { return root_; }

 private:
  JsonRef root_;
};

void check_heads(const JsonRef& root, ModelSpec& m, const std::string& heads_key,
                 const std::string& kv_key, bool head_dim_given) {
  if (!head_dim_given) {
    if (m.hidden % m.heads != 0)
      root.child(heads_key).fail(std::to_string(m.heads) + " heads do not divide the hidden size " +
                                 std::to_string(m.hidden));
    m.head_dim = m.hidden / m.heads;
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    root.child(kv_key).fail(std::to_string(m.kv_heads) + " key/value heads do not divide the " +
                            std::to_string(m.heads) + " attention heads");
}

Activation gated_activation(const JsonRef& ref) {
  const auto act = ref.string();
  // Gated MLPs (three projections): SiLU gives SwiGLU (Llama, Mistral, Qwen, DeepSeek); GELU
  // gives GeGLU, which costs the same FLOPs and bytes, so it is modelled as the same op.
  static const std::set<std::string, std::less<>> kKnown = {"silu", "swish", "gelu", "gelu_new",
                                                            "gelu_pytorch_tanh"};
  if (!kKnown.contains(act))
    ref.fail("unknown activation '" + act + "' (known: silu, swish, gelu, gelu_new, " +
             "gelu_pytorch_tanh)");
  return Activation::swiglu;
}

// Non-gated MLPs (an up and a down projection): Nemotron's squared ReLU (NemotronConfig's
// default hidden_act "relu2"; transformers ACT2FN), or a GELU.
Activation plain_activation(const JsonRef& ref) {
  const auto act = ref.string();
  if (act == "relu2") return Activation::relu2;
  static const std::set<std::string, std::less<>> kGelu = {"gelu", "gelu_new", "gelu_fast",
                                                           "gelu_pytorch_tanh"};
  if (!kGelu.contains(act))
    ref.fail("unknown activation '" + act + "' (known: relu2, gelu, gelu_new, gelu_fast, " +
             "gelu_pytorch_tanh)");
  return Activation::gelu;
}

ModelSpec read_gpt2(const HfReader& r, ModelSpec m) {
  m.hidden = dim(r.get("n_embd"));
  m.layers = layers(r.get("n_layer"));
  m.heads = dim(r.get("n_head"));
  m.kv_heads = m.heads;
  m.vocab = dim(r.get("vocab_size"));
  m.max_positions = dim(r.get("n_positions"));
  m.ffn = 4 * m.hidden;
  if (auto inner = r.maybe("n_inner")) m.ffn = dim(*inner);
  m.activation = Activation::gelu;
  if (auto act = r.maybe("activation_function")) {
    const auto a = act->string();
    if (a != "gelu" && a != "gelu_new" && a != "gelu_fast" && a != "gelu_pytorch_tanh")
      act->fail("unknown activation '" + a + "' (known: gelu, gelu_new, gelu_fast, " +
                "gelu_pytorch_tanh)");
  }
  m.norm = Norm::layernorm;
  m.positions = Positions::learned;
  m.tied_embeddings = true;  // GPT-2's default; a config may say otherwise
  if (auto t = r.maybe("tie_word_embeddings")) m.tied_embeddings = t->boolean();
  m.bias = true;
  m.dropout = true;
  check_heads(r.root(), m, "n_head", "n_head", false);
  return m;
}

ModelSpec read_llama_family(const HfReader& r, ModelSpec m) {
  m.hidden = dim(r.get("hidden_size"));
  m.layers = layers(r.get("num_hidden_layers"));
  m.heads = dim(r.get("num_attention_heads"));
  m.kv_heads = m.heads;
  if (auto kv = r.maybe("num_key_value_heads")) m.kv_heads = dim(*kv);
  m.vocab = dim(r.get("vocab_size"));
  m.ffn = dim(r.get("intermediate_size"));
  if (auto p = r.maybe("max_position_embeddings")) m.max_positions = dim(*p);
  // Gemma names it hidden_activation (its hidden_act is a deprecated alias). Nemotron's MLP has
  // no gate (NemotronMLP: up_proj, act_fn, down_proj).
  const auto act = r.get(r.has("hidden_activation") ? "hidden_activation" : "hidden_act");
  m.activation = m.format == "hf:nemotron" ? plain_activation(act) : gated_activation(act);
  m.norm = Norm::rmsnorm;
  m.positions = Positions::rope;
  if (auto theta = r.maybe("rope_theta")) {
    m.rope_theta = theta->number();
    if (!(m.rope_theta > 1) || m.rope_theta > 1e12) theta->fail("must be within (1, 1e12]");
  }
  // Gemma's configs tie the embeddings by default (Gemma2Config / Gemma3TextConfig), the
  // others untie them.
  m.tied_embeddings = m.format.starts_with("hf:gemma");
  if (auto t = r.maybe("tie_word_embeddings")) m.tied_embeddings = t->boolean();
  m.bias = false;
  m.qkv_bias = m.format == "hf:qwen2" || m.format == "hf:qwen2_moe";
  if (auto b = r.maybe("attention_bias")) m.qkv_bias = m.qkv_bias || b->boolean();
  m.dropout = false;
  bool head_dim_given = false;
  if (auto hd = r.maybe("head_dim")) {
    m.head_dim = dim(*hd);
    head_dim_given = true;
  }
  check_heads(r.root(), m, "num_attention_heads",
              r.has("num_key_value_heads") ? "num_key_value_heads" : "num_attention_heads",
              head_dim_given);
  return m;
}

void read_moe(const HfReader& r, ModelSpec& m, const std::string& type) {
  MoeSpec moe;
  if (type == "mixtral" || type == "gpt_oss") {
    // gpt-oss: every layer's MLP is the MoE; intermediate_size is one expert's.
    moe.experts = dim(r.get("num_local_experts"));
    moe.expert_ffn = m.ffn;
  } else if (type == "qwen3_moe") {
    moe.experts = dim(r.get("num_experts"));
    moe.expert_ffn = dim(r.get("moe_intermediate_size"));
    if (auto step = r.maybe("decoder_sparse_step"); step && step->integer() != 1)
      step->fail("only decoder_sparse_step 1 (every layer a MoE layer) is modelled");
    if (auto dense = r.maybe("mlp_only_layers"); dense && !dense->raw().empty())
      dense->fail("only an empty mlp_only_layers (every layer a MoE layer) is modelled");
  } else if (type == "qwen2_moe") {
    moe.experts = dim(r.get("num_experts"));
    moe.expert_ffn = dim(r.get("moe_intermediate_size"));
    // Qwen2-MoE has one shared expert of shared_expert_intermediate_size; it is expressed as
    // whole experts of expert_ffn, which keeps its parameters and FLOPs.
    const auto shared = dim(r.get("shared_expert_intermediate_size"));
    if (shared % moe.expert_ffn != 0)
      r.root()
          .child("shared_expert_intermediate_size")
          .fail("must be a multiple of moe_intermediate_size");
    moe.shared_experts = shared / moe.expert_ffn;
  } else if (type == "llama4_text") {
    // Llama 4 (transformers Llama4TextConfig): intermediate_size is an expert's and the shared
    // expert's (Llama4TextMoe has one), intermediate_size_mlp the dense layers' MLP; every
    // interleave_moe_layer_step-th layer is an MoE layer (moe_layers' default).
    moe.experts = dim(r.get("num_local_experts"));
    moe.expert_ffn = m.ffn;
    moe.shared_experts = 1;
    if (auto step = r.maybe("interleave_moe_layer_step")) {
      moe.layer_step = dim(*step);
      if (moe.layer_step > m.layers) step->fail("exceeds num_hidden_layers");
    }
    // The dense layers' width has a default in transformers (16384), so a config with dense
    // layers must say it; without dense layers it is not used.
    if (moe.layer_step > 1)
      m.ffn = dim(r.get("intermediate_size_mlp"));
    else if (auto dense = r.maybe("intermediate_size_mlp"))
      m.ffn = dim(*dense);
    if (auto list = r.maybe("moe_layers")) {
      const auto& raw = list->raw();
      bool every_step = raw.is_array();
      std::int64_t expected = moe.layer_step - 1;
      for (std::size_t i = 0; every_step && i < raw.size(); ++i, expected += moe.layer_step)
        every_step = expected < m.layers && raw[i].is_number_integer() &&
                     raw[i].get<std::int64_t>() == expected;
      if (!every_step || expected < m.layers)
        list->fail("only moe_layers every interleave_moe_layer_step-th layer (" +
                   std::to_string(moe.layer_step - 1) + ", " +
                   std::to_string(2 * moe.layer_step - 1) + ", ...) is modelled");
    }
  } else {  // deepseek_v2 / deepseek_v3
    moe.experts = dim(r.get("n_routed_experts"));
    moe.expert_ffn = dim(r.get("moe_intermediate_size"));
    if (auto s = r.maybe("n_shared_experts")) moe.shared_experts = count(*s);
    if (auto f = r.maybe("first_k_dense_replace")) moe.first_dense_layers = count(*f);
    if (auto freq = r.maybe("moe_layer_freq"); freq && freq->integer() != 1)
      freq->fail("only moe_layer_freq 1 (every layer after the dense ones) is modelled");
    // Group-limited routing: both keys or neither (DeepSeek-V2 and V3 configs carry both).
    if (r.has("n_group") || r.has("topk_group")) {
      const auto groups = r.get("n_group"), limit = r.get("topk_group");
      moe.groups = dim(groups);
      moe.group_limit = dim(limit);
      // Published configs use 8 (DeepSeek-V2, V3); the routing statistics
      // (model/moe_routing.hpp) enumerate the groups.
      if (moe.groups > 64) groups.fail("more than 64 expert groups are not modelled");
      if (moe.experts % moe.groups != 0)
        groups.fail("must divide n_routed_experts (" + std::to_string(moe.experts) + ")");
      if (moe.group_limit > moe.groups) limit.fail("exceeds n_group");
    }
  }
  // gpt-oss's config also spells it experts_per_token.
  const auto k = r.get(r.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token");
  moe.top_k = dim(k);
  if (moe.top_k > moe.experts)
    k.fail("top-k " + std::to_string(moe.top_k) + " exceeds the " + std::to_string(moe.experts) +
           " experts");
  if (moe.first_dense_layers > m.layers)
    r.root().child("first_k_dense_replace").fail("exceeds num_hidden_layers");
  if (moe.top_k > moe.group_limit * (moe.experts / moe.groups))
    k.fail("top-k " + std::to_string(moe.top_k) + " exceeds the experts of topk_group groups");
  m.moe = moe;
}

void read_mla(const HfReader& r, ModelSpec& m) {
  MlaSpec mla;
  if (auto q = r.maybe("q_lora_rank")) mla.q_lora_rank = dim(*q);
  mla.kv_lora_rank = dim(r.get("kv_lora_rank"));
  mla.qk_nope_head_dim = dim(r.get("qk_nope_head_dim"));
  mla.qk_rope_head_dim = dim(r.get("qk_rope_head_dim"));
  mla.v_head_dim = dim(r.get("v_head_dim"));
  m.mla = mla;
  // Attention runs with a query/key head dimension of nope + rope and one "KV head" per query
  // head after decompression.
  m.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  m.kv_heads = m.heads;
}

// What the dense decoders below share with Llama but meshsim does not price (each small next
// to the GEMMs and attention of a layer, and named here as assumptions): sliding-window
// attention (Mistral, Gemma 2/3, gpt-oss: priced as full attention, an overestimate past the
// window), QK-norm (Qwen3, Gemma 3), Gemma's post-attention and post-MLP norms and embedding
// scale, logit soft-capping (Gemma 2), gpt-oss's attention sinks and expert biases, partial
// rotary embeddings (Nemotron's partial_rotary_factor: RoPE is priced over the whole head),
// Llama 4's chunked attention (attention_chunk_size in three of four layers: priced as full
// attention, an overestimate past the chunk) and its parameter-free QK L2 norm.
ModelSpec read_hf(const JsonRef& root, ModelSpec m) {
  const HfReader r(root);
  const auto type_ref = r.get("model_type");
  const auto type = type_ref.string();
  m.format = "hf:" + type;
  if (auto id = r.maybe("_name_or_path")) m.hf_id = id->string();
  if (type == "gpt2") return read_gpt2(r, std::move(m));
  // Llama 4 (multimodal): the language model is text_config, a llama4_text config.
  if (type == "llama4") {
    const auto text = r.get("text_config");
    if (!text.raw().is_object()) text.fail("expected the language model's config object");
    const std::string hf_id = m.hf_id;
    const HfReader tr(text);
    m = read_llama_family(tr, std::move(m));
    read_moe(tr, m, "llama4_text");
    m.format = "hf:llama4";
    m.hf_id = hf_id;
    return m;
  }
  // Gemma 3 with vision: the language model is text_config (a gemma3_text config).
  if (type == "gemma3") {
    const auto text = r.get("text_config");
    if (!text.raw().is_object()) text.fail("expected the language model's config object");
    const std::string hf_id = m.hf_id;
    m = read_llama_family(HfReader(text), std::move(m));
    m.format = "hf:gemma3";
    m.hf_id = hf_id;
    return m;
  }
  static const std::set<std::string, std::less<>> kDense = {
      "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "nemotron"};
  static const std::set<std::string, std::less<>> kMoe = {
      "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text"};
  if (!kDense.contains(type) && !kMoe.contains(type))
    type_ref.fail(
        "unsupported model_type '" + type +
        "' (supported: gpt2, llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3, "
        "gemma3_text, nemotron, mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss, "
        "llama4, llama4_text; "
        "or the plain GPT form)");
  m = read_llama_family(r, std::move(m));
  if (type == "nemotron") {
    // NemotronLayerNorm1P is a LayerNorm (weight and bias); the linears' biases follow
    // mlp_bias (attention_bias adds the QKV bias as for Llama). Published Nemotron configs set
    // both false.
    m.norm = Norm::layernorm;
    if (auto b = r.maybe("mlp_bias")) m.bias = b->boolean();
  }
  // DeepSeek's multi-head latent attention sets its own head dimension and KV heads. Its
  // multi-token-prediction module (num_nextn_predict_layers) is a training add-on that meshsim
  // does not simulate; its parameters (14 B in DeepSeek-V3) are not counted.
  if (type.starts_with("deepseek")) read_mla(r, m);
  if (kMoe.contains(type)) read_moe(r, m, type);
  return m;
}

// meshsim's own model forms may carry a name and a source (where the numbers come from).
void read_label(ObjectReader& r, ModelSpec& m) {
  if (auto n = r.optional("name")) m.name = n->string();
  if (auto s = r.optional("source")) (void)s->string();
}

ModelSpec read_plain_gpt(const JsonRef& root, ModelSpec m) {
  ObjectReader r(root);
  m.format = "gpt";
  read_label(r, m);
  m.hidden = dim(r.required("hidden"));
  m.layers = layers(r.required("layers"));
  m.heads = dim(r.required("heads"));
  m.kv_heads = m.heads;
  if (auto kv = r.optional("kv_heads")) m.kv_heads = dim(*kv);
  m.vocab = dim(r.required("vocab"));
  m.max_positions = dim(r.required("max_positions"));
  m.ffn = 4 * m.hidden;
  if (auto f = r.optional("ffn")) m.ffn = dim(*f);
  // The GPT form: GELU MLP, LayerNorm, learned positions, tied embeddings, biases and dropout, as
  // Megatron-LM's GPT (Narayanan et al. 2021); each can be changed.
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  m.positions = Positions::learned;
  m.tied_embeddings = true;
  m.bias = true;
  m.dropout = true;
  if (auto a = r.optional("activation")) {
    const auto s = a->string();
    if (s == "gelu")
      m.activation = Activation::gelu;
    else if (s == "swiglu")
      m.activation = Activation::swiglu;
    else if (s == "relu2")
      m.activation = Activation::relu2;
    else
      a->fail("unknown activation '" + s + "' (known: gelu, swiglu, relu2)");
  }
  if (auto t = r.optional("tie_embeddings")) m.tied_embeddings = t->boolean();
  if (auto b = r.optional("bias")) m.bias = b->boolean();
  if (auto d = r.optional("dropout")) m.dropout = d->boolean();
  r.finish();
  check_heads(root, m, "heads", root.raw().contains("kv_heads") ? "kv_heads" : "heads", false);
  return m;
}

ModelSpec read_params_only(const JsonRef& root, ModelSpec m) {
  ObjectReader r(root);
  m.format = "params";
  read_label(r, m);
  const auto p = r.required("params");
  const double v = p.positive_number();
  if (v > 1e16) p.fail("is implausibly large (more than 1e16 parameters)");
  m.declared_params = v;
  r.finish();
  return m;
}

}  // namespace

ModelSpec read_model(const JsonRef& root) {
  if (!root.raw().is_object()) root.fail("expected a model object");
  ModelSpec m;
  m.file = root.file();
  m.name = stem_of(root.file());
  if (root.raw().contains("model_type")) return read_hf(root, std::move(m));
  if (root.raw().contains("params")) return read_params_only(root, std::move(m));
  if (root.raw().contains("hidden")) return read_plain_gpt(root, std::move(m));
  root.fail(
      "not a model: expected a Hugging Face config (model_type), the GPT form (hidden, "
      "layers, heads, vocab, max_positions) or {params}");
}

ModelSpec load_model(const std::string& path) {
  const Json doc = load_json_file(path);
  return read_model(JsonRef::root(doc, path));
}

}  // namespace meshsim
