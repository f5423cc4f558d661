#include "model/model_loader.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "model/param_count.hpp"
#include "model/workload.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {
ModelSpec bundled(const std::string& name) {
  return load_model(source_path("workloads/models/" + name + ".json"));
}
std::string error_of(const std::string& text) {
  try {
    const auto doc = parse_json_text(text, "m.json");
    read_model(JsonRef::root(doc, "m.json"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("Hugging Face configs are read as they are") {
  const auto l = bundled("llama3.1-70b");
  CHECK(l.format == "hf:llama");
  CHECK(l.hidden == 8192);
  CHECK(l.layers == 80);
  CHECK(l.heads == 64);
  CHECK(l.kv_heads == 8);
  CHECK(l.head_dim == 128);
  CHECK(l.ffn == 28672);
  CHECK(l.vocab == 128256);
  CHECK(l.activation == Activation::swiglu);
  CHECK(l.norm == Norm::rmsnorm);
  CHECK_FALSE(l.tied_embeddings);
  CHECK_FALSE(l.moe);

  const auto g = bundled("gpt3-175b");
  CHECK(g.format == "hf:gpt2");
  CHECK(g.ffn == 4 * 12288);
  CHECK(g.head_dim == 128);
  CHECK(g.activation == Activation::gelu);
  CHECK(g.positions == Positions::learned);
  CHECK(g.tied_embeddings);

  const auto x = bundled("mixtral-8x7b");
  REQUIRE(x.moe);
  CHECK(x.moe->experts == 8);
  CHECK(x.moe->top_k == 2);
  CHECK(x.moe->expert_ffn == 14336);

  const auto d = bundled("deepseek-v3");
  REQUIRE(d.moe);
  REQUIRE(d.mla);
  CHECK(d.moe->experts == 256);
  CHECK(d.moe->shared_experts == 1);
  CHECK(d.moe->first_dense_layers == 3);
  CHECK(d.mla->kv_lora_rank == 512);
  CHECK(d.head_dim == 192);   // nope 128 + rope 64
  CHECK(d.moe->groups == 8);  // node-limited routing: n_group 8, topk_group 4
  CHECK(d.moe->group_limit == 4);
  CHECK(x.moe->groups == 1);  // Mixtral routes over all its experts
  CHECK(x.moe->group_limit == 1);
}

TEST_CASE("parameter counts from the architecture match the published ones") {
  // Published (shared/models/README.md): Llama 3.1 8.03 B, 70.6 B, 405.9 B (within 0.5 %);
  // Mixtral 46.7 B total, 12.9 B active; DeepSeek-V3 671 B total, 37 B active (its
  // multi-token-prediction module, 14 B more, is not counted); GPT-3 175 B.
  CHECK(count_params(bundled("llama3.1-8b")).total == doctest::Approx(8.03e9).epsilon(0.005));
  CHECK(count_params(bundled("llama3.1-70b")).total == doctest::Approx(70.6e9).epsilon(0.005));
  CHECK(count_params(bundled("llama3.1-405b")).total == doctest::Approx(405.9e9).epsilon(0.005));
  const auto mix = count_params(bundled("mixtral-8x7b"));
  CHECK(mix.total == doctest::Approx(46.7e9).epsilon(0.005));
  CHECK(mix.active == doctest::Approx(12.9e9).epsilon(0.005));
  const auto ds = count_params(bundled("deepseek-v3"));
  CHECK(ds.total == doctest::Approx(671e9).epsilon(0.005));
  CHECK(ds.active == doctest::Approx(37e9).epsilon(0.02));
  CHECK(count_params(bundled("gpt3-175b")).total == doctest::Approx(175e9).epsilon(0.005));
  CHECK(count_params(bundled("llama2-70b")).total == doctest::Approx(69e9).epsilon(0.005));
  // Llama 4 (model cards: Scout 17 B active; Maverick 400 B total, 17 B active), counted by
  // hand: attention 5120·(5120 + 2·1024) + 5120², two norms, a router of 5120 × E, E routed and
  // one shared expert of 3·5120·8192 in each MoE layer, dense layers of 3·5120·16384, untied
  // 202048 × 5120 ends and the final norm.
  {
    const double attn = 5120.0 * 7168 + 5120.0 * 5120 + 2 * 5120;
    const double expert = 3 * 5120.0 * 8192, dense = 3 * 5120.0 * 16384;
    const double ends = 2 * 202048.0 * 5120 + 5120;
    const auto scout = count_params(bundled("llama4-scout"));
    CHECK(scout.total == 48 * (attn + 5120.0 * 16 + 17 * expert) + ends);  // 107.77 B
    CHECK(scout.active == 48 * (attn + 5120.0 * 16 + 2 * expert) + ends);
    CHECK(scout.active == doctest::Approx(17e9).epsilon(0.02));
    const auto maverick = count_params(bundled("llama4-maverick"));
    CHECK(maverick.total == 24 * (attn + 5120.0 * 128 + 129 * expert) + 24 * (attn + dense) + ends);
    CHECK(maverick.total == doctest::Approx(400e9).epsilon(0.005));
    CHECK(maverick.active == doctest::Approx(17e9).epsilon(0.02));
  }
  // Nemotron-4 340B (arXiv 2406.11704 section 2): 9.4 B embedding, 331.6 B non-embedding.
  const auto nemo = count_params(bundled("nemotron-4-340b"));
  CHECK(nemo.total == doctest::Approx(341.0e9).epsilon(0.002));
  CHECK(nemo.embedding + nemo.output == doctest::Approx(9.4e9).epsilon(0.005));  // untied
}

TEST_CASE("Llama 3.1 8B, counted by hand") {
  // Per layer: Q and O 4096·4096 each, K and V 4096·1024 each, MLP 3·4096·14336, two RMSNorms
  // of 4096. Ends: embedding and untied head 128256·4096 each, final norm 4096.
  const double layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096;
  const double total = 32 * layer + 2.0 * 128256 * 4096 + 4096;
  CHECK(count_params(bundled("llama3.1-8b")).total == total);
}

TEST_CASE("the Megatron-LM GPT sizes match their tables") {
  // validation/training.md A1 (SC21 Table 1), parameters in billions.
  const std::pair<const char*, double> rows[] = {
      {"gpt-sc21-3.6b", 3.6},   {"gpt-sc21-7.5b", 7.5},   {"gpt-sc21-18b", 18.4},
      {"gpt-sc21-39b", 39.1},   {"gpt-sc21-76b", 76.1},   {"gpt-sc21-145b", 145.6},
      {"gpt-sc21-310b", 310.1}, {"gpt-sc21-530b", 529.6}, {"gpt-sc21-1t", 1008.0}};
  for (const auto& row : rows) {
    const auto [name, billions] = row;
    const char* model = name;  // INFO captures it (clang 14 cannot capture a structured binding)
    INFO(model);
    // The table gives one decimal.
    CHECK(std::abs(count_params(bundled(model)).total / 1e9 - billions) <= 0.05);
  }
  // Narayanan et al.'s formula P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) for the 1.7B row
  // (the table rounds 1.65 up).
  const double l = 24, h = 2304, V = 51200, s = 2048;
  CHECK(count_params(bundled("gpt-sc21-1.7b")).total ==
        doctest::Approx(12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))));
}

TEST_CASE("every bundled model and job loads") {
  int models = 0, jobs = 0;
  for (const auto& e : std::filesystem::directory_iterator(source_path("workloads/models"))) {
    INFO(e.path().string());
    const auto m = load_model(e.path().string());
    CHECK(count_params(m).total > 0);
    ++models;
  }
  for (const auto& e : std::filesystem::directory_iterator(source_path("workloads/jobs"))) {
    INFO(e.path().string());
    const auto w = load_workload(e.path().string());
    CHECK(w.job.seq.has_value());
    CHECK(count_params(w.model).total > 0);
    ++jobs;
  }
  CHECK(models >= 26);
  CHECK(jobs >= 4);
}

TEST_CASE("the plain GPT form and the parameter-count form") {
  const auto doc = Json::parse(R"({"hidden": 1024, "layers": 2, "heads": 16, "vocab": 1000,
                                   "max_positions": 512})");
  const auto m = read_model(JsonRef::root(doc, "/models/tiny.json"));
  CHECK(m.name == "tiny");
  CHECK(m.format == "gpt");
  CHECK(m.ffn == 4096);
  CHECK(m.head_dim == 64);
  // 12h² + 13h per layer (weights and biases of QKV, O, two MLP GEMMs, two LayerNorms), then
  // token and position embeddings (tied head) and the final LayerNorm.
  const double h = 1024;
  CHECK(count_params(m).total == 2 * (12 * h * h + 13 * h) + (1000 + 512) * h + 2 * h);
  const auto p = Json::parse(R"({"params": 7e10})");
  const auto seventy = read_model(JsonRef::root(p, "dense-70b.json"));
  CHECK_FALSE(seventy.has_architecture());
  CHECK(count_params(seventy).total == 7e10);
}

TEST_CASE("bad model files: one line naming the JSON path") {
  CHECK(error_of(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
        "num_attention_heads": 48, "vocab_size": 10, "intermediate_size": 8,
        "hidden_act": "silu"})") ==
        "m.json:/num_attention_heads: 48 heads do not divide the hidden size 4096");
  CHECK(error_of(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
        "num_attention_heads": 32, "num_key_value_heads": 5, "vocab_size": 10,
        "intermediate_size": 8, "hidden_act": "silu"})") ==
        "m.json:/num_key_value_heads: 5 key/value heads do not divide the 32 attention heads");
  CHECK(error_of(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
        "num_attention_heads": 32, "vocab_size": 10, "intermediate_size": 8,
        "hidden_act": "relu2"})") ==
        "m.json:/hidden_act: unknown activation 'relu2' (known: silu, swish, gelu, gelu_new, "
        "gelu_pytorch_tanh)");
  CHECK(error_of(R"({"model_type": "llama", "num_hidden_layers": 2})") ==
        "m.json:/: missing required field 'hidden_size'");
  CHECK(error_of(R"({"model_type": "mamba"})")
            .starts_with("m.json:/model_type: unsupported model_type 'mamba'"));
  CHECK(error_of(R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 8, "vocab_size": 10, "intermediate_size": 8, "hidden_act": "silu",
        "num_local_experts": 4, "num_experts_per_tok": 5})") ==
        "m.json:/num_experts_per_tok: top-k 5 exceeds the 4 experts");
  const std::string ds = R"({"model_type": "deepseek_v3", "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 10,
        "intermediate_size": 8, "hidden_act": "silu", "moe_intermediate_size": 8,
        "n_routed_experts": 16, "num_experts_per_tok": 4, "kv_lora_rank": 8,
        "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8)";
  CHECK(error_of(ds + R"(, "n_group": 3, "topk_group": 1})") ==
        "m.json:/n_group: must divide n_routed_experts (16)");
  CHECK(error_of(ds + R"(, "n_group": 128, "topk_group": 1})") ==
        "m.json:/n_group: more than 64 expert groups are not modelled");
  CHECK(error_of(ds + R"(, "n_group": 4, "topk_group": 5})") ==
        "m.json:/topk_group: exceeds n_group");
  CHECK(error_of(ds + R"(, "n_group": 4})") == "m.json:/: missing required field 'topk_group'");
  // top-4 from one group of 4 experts: fine; from one group of 2 (8 groups): impossible.
  CHECK(error_of(ds + R"(, "n_group": 4, "topk_group": 1})") == "no error");
  CHECK(error_of(ds + R"(, "n_group": 8, "topk_group": 1})") ==
        "m.json:/num_experts_per_tok: top-k 4 exceeds the experts of topk_group groups");
  CHECK(error_of(R"({"hidden": 1024, "layers": 2, "heads": 16, "vocab": 1000,
        "max_positions": 512, "activation": "relu"})") ==
        "m.json:/activation: unknown activation 'relu' (known: gelu, swiglu, relu2)");
  CHECK(error_of(R"({"hidden": 1024, "layers": 2, "heads": 16, "vocab": 1000,
        "max_positions": 512, "layer": 3})")
            .starts_with("m.json:/layer: unknown key 'layer'"));
  CHECK(error_of(R"({"hidden": 1024, "layers": -2, "heads": 16, "vocab": 1000,
        "max_positions": 512})")
            .starts_with("m.json:/layers:"));
  CHECK(error_of(R"([1, 2])") == "m.json:/: expected a model object");
  CHECK(error_of(R"({"name": "x"})")
            .starts_with("m.json:/: not a model: expected a Hugging Face config"));
  CHECK(error_of(R"({"params": -1})").starts_with("m.json:/params:"));
}

TEST_CASE("a job file names its model relative to itself") {
  const auto w = load_workload(source_path("workloads/jobs/llama3.1-70b-32k.json"));
  CHECK(w.model.hidden == 8192);
  CHECK(w.job.seq == 32768);
  CHECK(w.job.dtype == DType::bf16);
}

TEST_CASE("a job file whose model is not there names its own field") {
  // The same message for a missing file and for a folder (an empty name resolves to the job's).
  const auto dir = source_path("workloads/jobs");
  for (const auto& [name, resolved] :
       {std::pair{"no-such-model.json", dir + "/no-such-model.json"}, std::pair{"", dir + "/"}}) {
    const Json doc = {{"model", name}, {"seq", 4096}};
    const auto job = dir + "/job.json";
    std::string message;
    try {
      read_workload(JsonRef::root(doc, job));
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK(message == job + ":/model: no model file at '" + resolved +
                         "' (the path is relative to this job file)");
  }
}

namespace {
ModelSpec from_text(const std::string& text) {
  const auto doc = parse_json_text(text, "config.json");
  return read_model(JsonRef::root(doc, "config.json"));
}
}  // namespace

TEST_CASE(
    "Qwen3, Qwen3-MoE, Phi-3, Gemma 2/3, gpt-oss and Nemotron configs, checked by parameter "
    "count") {
  // The configs' architecture keys as Hugging Face publishes them; the totals are the model
  // cards' (Qwen3 technical report Table 1, Microsoft's Phi-3 report, Google's Gemma 2 report,
  // OpenAI's gpt-oss model card: 116.83 B total).
  const auto qwen3 = from_text(R"({"model_type": "qwen3", "hidden_size": 4096,
      "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
      "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "hidden_act": "silu",
      "attention_bias": false, "tie_word_embeddings": false, "rope_theta": 1000000})");
  CHECK(qwen3.format == "hf:qwen3");
  CHECK_FALSE(qwen3.qkv_bias);  // Qwen3 dropped Qwen2's QKV bias
  CHECK(qwen3.rope_theta == 1e6);
  CHECK(count_params(qwen3).total == doctest::Approx(8.2e9).epsilon(0.005));

  const auto moe = from_text(R"({"model_type": "qwen3_moe", "hidden_size": 2048,
      "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
      "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
      "vocab_size": 151936, "hidden_act": "silu", "tie_word_embeddings": false})");
  REQUIRE(moe.moe);
  CHECK(moe.moe->experts == 128);
  CHECK(moe.moe->expert_ffn == 768);
  CHECK(moe.moe->shared_experts == 0);
  CHECK(moe.moe_layers() == 48);
  // Qwen3-30B-A3B: 30.5 B total, 3.3 B active. By hand: attention 2048·(4096 + 2·512) + 4096·2048,
  // 128 experts of 3·2048·768 and a 2048×128 router per layer, untied 151936·2048 ends.
  const double attn = 2048.0 * (4096 + 1024) + 4096.0 * 2048;
  const double layer = attn + 2 * 2048 + 2048.0 * 128 + 128 * 3.0 * 2048 * 768;
  CHECK(count_params(moe).total == 48 * layer + 2 * 151936.0 * 2048 + 2048);
  CHECK(count_params(moe).total == doctest::Approx(30.5e9).epsilon(0.005));
  CHECK(count_params(moe).active == doctest::Approx(3.3e9).epsilon(0.02));

  const auto phi = from_text(R"({"model_type": "phi3", "hidden_size": 3072,
      "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 32, "vocab_size": 32064, "hidden_act": "silu",
      "tie_word_embeddings": false})");
  CHECK(count_params(phi).total == doctest::Approx(3.82e9).epsilon(0.005));

  const auto gemma2 = from_text(R"({"model_type": "gemma2", "hidden_size": 3584,
      "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16,
      "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000,
      "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096})");
  CHECK(gemma2.tied_embeddings);                   // Gemma's default when the config does not say
  CHECK(gemma2.activation == Activation::swiglu);  // GeGLU: the same three projections
  CHECK(count_params(gemma2).total == doctest::Approx(9.24e9).epsilon(0.005));

  // Gemma 3 with vision: the language model is text_config.
  const auto gemma3 =
      from_text(R"({"model_type": "gemma3", "_name_or_path": "google/gemma-3-27b-it",
      "vision_config": {"hidden_size": 1152}, "text_config": {"model_type": "gemma3_text",
      "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
      "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
      "vocab_size": 262208, "hidden_activation": "gelu_pytorch_tanh"}})");
  CHECK(gemma3.format == "hf:gemma3");
  CHECK(gemma3.hf_id == "google/gemma-3-27b-it");
  CHECK(gemma3.layers == 62);
  CHECK(gemma3.tied_embeddings);

  const auto oss = from_text(R"({"model_type": "gpt_oss", "hidden_size": 2880,
      "intermediate_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64,
      "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128,
      "experts_per_token": 4, "vocab_size": 201088, "hidden_act": "silu",
      "attention_bias": true, "tie_word_embeddings": false, "sliding_window": 128})");
  REQUIRE(oss.moe);
  CHECK(oss.moe->top_k == 4);
  CHECK(oss.moe->expert_ffn == 2880);
  CHECK(oss.qkv_bias);
  CHECK(count_params(oss).total == doctest::Approx(116.83e9).epsilon(0.005));

  // Llama 4: the language model is text_config; every interleave_moe_layer_step-th layer is an
  // MoE layer (layers 1, 3, ... for 2), the others dense of intermediate_size_mlp.
  const auto maverick = bundled("llama4-maverick");
  CHECK(maverick.format == "hf:llama4");
  CHECK(maverick.hf_id == "meta-llama/Llama-4-Maverick-17B-128E");
  REQUIRE(maverick.moe);
  CHECK(maverick.moe->layer_step == 2);
  CHECK(maverick.moe->experts == 128);
  CHECK(maverick.moe->shared_experts == 1);
  CHECK(maverick.moe->expert_ffn == 8192);
  CHECK(maverick.ffn == 16384);
  CHECK(maverick.moe_layers() == 24);
  CHECK_FALSE(maverick.is_moe_layer(0));
  CHECK(maverick.is_moe_layer(1));
  CHECK_FALSE(maverick.is_moe_layer(46));
  CHECK(maverick.is_moe_layer(47));
  const auto scout = bundled("llama4-scout");
  CHECK(scout.moe_layers() == 48);
  CHECK(scout.is_moe_layer(0));
  const std::string text = R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "hidden_size": 64, "intermediate_size": 32, "intermediate_size_mlp": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
      "vocab_size": 100, "hidden_act": "silu", "num_local_experts": 4, "num_experts_per_tok": 1,
      "interleave_moe_layer_step": 2)";
  CHECK(error_of(text + "}}") == "no error");
  CHECK(error_of(text + R"(, "moe_layers": [1, 3]}})") == "no error");
  CHECK(error_of(text + R"(, "moe_layers": [0, 2]}})") ==
        "m.json:/text_config/moe_layers: only moe_layers every interleave_moe_layer_step-th layer "
        "(1, 3, ...) is modelled");
  CHECK(error_of(text + R"(, "moe_layers": [1]}})") ==
        "m.json:/text_config/moe_layers: only moe_layers every interleave_moe_layer_step-th layer "
        "(1, 3, ...) is modelled");
  CHECK(error_of(text + R"(, "moe_layers": [1, 3, 5]}})") ==
        "m.json:/text_config/moe_layers: only moe_layers every interleave_moe_layer_step-th layer "
        "(1, 3, ...) is modelled");
  std::string too_far = text;
  const std::string step2 = R"("interleave_moe_layer_step": 2)";
  too_far.replace(too_far.find(step2), step2.size(), R"("interleave_moe_layer_step": 5)");
  std::string no_mlp = text;
  const std::string mlp = R"("intermediate_size_mlp": 64,)";
  no_mlp.erase(no_mlp.find(mlp), mlp.size());
  CHECK(error_of(no_mlp + "}}") ==
        "m.json:/text_config: missing required field 'intermediate_size_mlp'");
  CHECK(error_of(too_far + "}}") ==
        "m.json:/text_config/interleave_moe_layer_step: exceeds num_hidden_layers");

  // Nemotron: an ungated squared-ReLU MLP (up, relu2, down) and LayerNorm.
  const auto nemotron = from_text(R"({"model_type": "nemotron", "hidden_size": 4096,
      "intermediate_size": 16384, "num_hidden_layers": 2, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 1000, "hidden_act": "relu2",
      "partial_rotary_factor": 0.5, "attention_bias": false, "mlp_bias": false,
      "tie_word_embeddings": false})");
  CHECK(nemotron.format == "hf:nemotron");
  CHECK(nemotron.activation == Activation::relu2);
  CHECK(nemotron.norm == Norm::layernorm);
  CHECK_FALSE(nemotron.bias);
  CHECK_FALSE(nemotron.tied_embeddings);
  // By hand: attention 4096·(4096 + 2·1024) + 4096², MLP 2·4096·16384, two LayerNorms of 2·4096
  // per layer; untied 1000 × 4096 ends and the final LayerNorm.
  CHECK(count_params(nemotron).total ==
        2 * (4096.0 * 6144 + 4096.0 * 4096 + 2 * 4096.0 * 16384 + 4 * 4096.0) + 2 * 1000.0 * 4096 +
            2 * 4096.0);
  CHECK(error_of(R"({"model_type": "nemotron", "hidden_size": 64, "intermediate_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
      "hidden_act": "silu"})") ==
        "m.json:/hidden_act: unknown activation 'silu' (known: relu2, gelu, gelu_new, gelu_fast, "
        "gelu_pytorch_tanh)");

  CHECK(error_of(R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 64,
      "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 100, "hidden_act": "silu",
      "mlp_only_layers": [0]})") ==
        "m.json:/mlp_only_layers: only an empty mlp_only_layers (every layer a MoE layer) is "
        "modelled");
  CHECK(error_of(R"({"model_type": "gemma3", "text_config": 5})") ==
        "m.json:/text_config: expected the language model's config object");
}
