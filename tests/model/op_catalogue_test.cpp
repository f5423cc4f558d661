#include "model/op_catalogue.hpp"

#include <doctest/doctest.h>

#include "core/error.hpp"
#include "model/model_loader.hpp"
#include "model/param_count.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {

// A GPT layer as Korthikanti et al. 2022 analyse it: h = 1024, a = 16 heads, GELU MLP of 4h,
// LayerNorm, dropout, biases.
ModelSpec gpt() {
  const auto doc = Json::parse(R"({"hidden": 1024, "layers": 4, "heads": 16, "vocab": 5120,
                                   "max_positions": 2048})");
  return read_model(JsonRef::root(doc, "gpt.json"));
}

OpTotals layer(const ModelSpec& m, std::int64_t s, std::int64_t b, Sharding sh, bool flash) {
  LayerShape shape;
  shape.seq = s;
  shape.micro_batch = b;
  shape.flash_attention = flash;
  return totals(layer_ops(m, 0, shape, sh));
}

const OpSpec& find(const std::vector<OpSpec>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  FAIL("no op " << name);
  return ops.front();
}

}  // namespace

TEST_CASE("Korthikanti et al.: activations of a GPT layer") {
  const auto m = gpt();
  const double s = 2048, b = 2, h = 1024, a = 16;
  SUBCASE("no parallelism: s·b·h·(34 + 5·a·s/h)") {
    const auto t = layer(m, 2048, 2, {}, false);
    CHECK(t.saved_bytes + t.score_bytes == s * b * h * (34 + 5 * a * s / h));
    // Selective recompute drops the 5·a·s/h term.
    CHECK(t.saved_bytes == s * b * h * 34);
  }
  SUBCASE("tensor parallel without SP: s·b·h·(10 + 24/t + 5·a·s/(h·t))") {
    for (std::int64_t tp : {2, 4, 8}) {
      const double t = static_cast<double>(tp);
      const auto r = layer(m, 2048, 2, {tp, false, 1, 1}, false);
      CHECK(r.saved_bytes + r.score_bytes == s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
      CHECK(r.saved_bytes == s * b * h * (10 + 24 / t));
    }
  }
  SUBCASE("tensor and sequence parallel: s·b·h/t·(34 + 5·a·s/h)") {
    for (std::int64_t tp : {2, 8}) {
      const double t = static_cast<double>(tp);
      const auto r = layer(m, 2048, 2, {tp, true, 1, 1}, false);
      CHECK(r.saved_bytes + r.score_bytes == doctest::Approx(s * b * h / t * (34 + 5 * a * s / h)));
      CHECK(r.saved_bytes == doctest::Approx(s * b * h / t * 34));
    }
  }
  SUBCASE("flash attention keeps no scores, only the fp32 log-sum-exp per query and head") {
    const auto r = layer(m, 2048, 2, {4, true, 1, 1}, true);
    CHECK(r.score_bytes == 0);
    CHECK(r.saved_bytes == doctest::Approx(s * b * h / 4 * 34 + 4.0 * s * b * a / 4));
  }
  SUBCASE("context parallel splits every per-token tensor by cp") {
    const auto one = layer(m, 2048, 2, {2, true, 1, 1}, true);
    const auto four = layer(m, 2048, 2, {2, true, 4, 1}, true);
    CHECK(four.saved_bytes == doctest::Approx(one.saved_bytes / 4));
  }
  SUBCASE("a causal CP rank does 1/cp of the sequence's attention (load-balanced chunks)") {
    LayerShape shape;
    shape.seq = 8192;
    const auto whole = find(layer_ops(m, 0, shape, {2, true, 1, 1}), "attention_core");
    const auto rank = find(layer_ops(m, 0, shape, {2, true, 4, 1}), "attention_core");
    CHECK(rank.forward.attention.seq_q == 2048);
    CHECK(rank.forward.attention.seq_kv == 8192);
    CHECK(rank.forward.attention.balanced);
    CHECK(!whole.forward.attention.balanced);
    // 4·heads·d·(8192·4096)/4 against 4·heads·d·2048·(8192 − 1024) if it were the last chunk.
    CHECK(rank.forward.flops == doctest::Approx(whole.forward.flops / 4));
    CHECK(rank.backward_input.flops == doctest::Approx(whole.backward_input.flops / 4));
    // The MFU convention keeps the full s² count, split evenly.
    CHECK(rank.model_flops == doctest::Approx(whole.model_flops / 4));
  }
}

TEST_CASE("GEMM shapes under tensor parallelism (Megatron column/row split)") {
  const auto m = load_model(source_path("workloads/models/llama3.1-70b.json"));
  LayerShape shape;
  shape.seq = 4096;
  shape.micro_batch = 2;
  const auto ops = layer_ops(m, 0, shape, {8, true, 1, 1});
  // QKV: (64 + 2·8)·128 columns split over 8 ranks: 8 query heads and 1 KV head per rank.
  const auto& qkv = find(ops, "qkv_proj");
  CHECK(qkv.role == TpRole::column_parallel);
  CHECK(qkv.forward.gemm.m == 8192);
  CHECK(qkv.forward.gemm.n == (8 + 2 * 1) * 128);
  CHECK(qkv.forward.gemm.k == 8192);
  // dgrad and wgrad: dX[M×K] = dY·Wᵀ, dW[K×N] = Xᵀ·dY.
  CHECK(qkv.backward_input.gemm.n == 8192);
  CHECK(qkv.backward_input.gemm.k == 10 * 128);
  CHECK(qkv.backward_weight.gemm.m == 8192);
  CHECK(qkv.backward_weight.gemm.k == 8192);
  const auto& up = find(ops, "mlp_up");
  CHECK(up.forward.gemm.n == 2 * 28672 / 8);  // gate and up
  const auto& down = find(ops, "mlp_down");
  CHECK(down.role == TpRole::row_parallel);
  CHECK(down.forward.gemm.k == 28672 / 8);
  const auto& core = find(ops, "attention_core");
  CHECK(core.forward.attention.heads == 8);
  CHECK(core.forward.attention.kv_heads == 1);
  CHECK(core.forward.attention.seq_q == 4096);
  // Forward, dgrad and wgrad FLOPs of a GEMM are equal; attention backward is all dgrad.
  CHECK(up.backward_input.flops == up.forward.flops);
  CHECK(up.backward_weight.flops == up.forward.flops);
  CHECK(core.backward_weight.empty());
  // With 16 ranks the 8 KV heads are replicated: one per rank.
  const auto wide = layer_ops(m, 0, shape, {16, true, 1, 1});
  CHECK(find(wide, "qkv_proj").forward.gemm.n == (4 + 2) * 128);
}

TEST_CASE("per-rank weights sum to the model's parameters") {
  for (const char* name : {"llama3.1-8b", "mixtral-8x7b", "deepseek-v3", "gpt3-175b"}) {
    INFO(name);
    const auto m = load_model(source_path(std::string("workloads/models/") + name + ".json"));
    LayerShape shape;
    shape.seq = 1024;
    double total = totals(embedding_ops(m, shape, {})).weight_params +
                   totals(head_ops(m, shape, {})).weight_params;
    for (std::int64_t l = 0; l < m.layers; ++l)
      total += totals(layer_ops(m, l, shape, {})).weight_params;
    CHECK(total == doctest::Approx(count_params(m).total));
  }
}

TEST_CASE("training FLOPs per token: 6N + 12·L·h·s") {
  // Convention (DESIGN.md; PaLM appendix B; Narayanan et al. 2021): every GEMM counts 2·m·n·k,
  // attention counts the full s² (4·s·h per layer and token, forward), backward is twice
  // forward, and N is the parameters used in GEMMs: all but the input embedding table (a lookup)
  // and norms, with a tied head counted once in the logits GEMM.
  for (const char* name : {"llama3.1-8b", "llama3.1-70b", "gpt3-175b", "llama3.1-405b"}) {
    INFO(name);
    const auto m = load_model(source_path(std::string("workloads/models/") + name + ".json"));
    const auto p = count_params(m);
    const double lookup =
        m.tied_embeddings ? p.embedding - static_cast<double>(m.vocab * m.hidden) : p.embedding;
    const double n = p.total - lookup;
    const double seq = 4096;
    const double expected = 6 * n + 12.0 * static_cast<double>(m.layers * m.hidden) * seq;
    CHECK(training_flops_per_token(m, 4096) == doctest::Approx(expected).epsilon(0.01));
  }
  // MoE: active parameters only.
  const auto mix = load_model(source_path("workloads/models/mixtral-8x7b.json"));
  const auto p = count_params(mix);
  const double n = p.active - p.embedding;
  CHECK(training_flops_per_token(mix, 4096) ==
        doctest::Approx(6 * n + 12.0 * 32 * 4096 * 4096).epsilon(0.01));
}

TEST_CASE("MoE ops: routed tokens, expert GEMMs grouped per local expert") {
  const auto m = load_model(source_path("workloads/models/mixtral-8x7b.json"));
  LayerShape shape;
  shape.seq = 4096;
  const auto ops = layer_ops(m, 0, shape, {1, false, 1, 4});
  const auto& up = find(ops, "expert_up");
  // 4096 tokens × top-2 = 8192 routed token copies over 8/4 = 2 local experts: 4096 each.
  CHECK(up.forward.gemm.batch == 2);
  CHECK(up.forward.gemm.m == 4096);
  CHECK(up.forward.gemm.n == 2 * 14336);
  CHECK(up.expert_weights);
  CHECK(up.weight_params == 2.0 * 4096 * 2 * 14336);
  CHECK(find(ops, "router").forward.gemm.n == 8);
  // One decode token picks 2 of 8 experts: the grouped GEMM runs (and reads the weights of) the
  // expected 8·(1 − (6/8)^1) = 2 active experts, not all 8.
  LayerShape one;
  one.seq = 1;
  const auto decode = layer_ops(m, 0, one, {1, false, 1, 1});
  const auto& dup = find(decode, "expert_up");
  CHECK(dup.forward.gemm.batch == 2);
  CHECK(dup.forward.gemm.m == 1);
  CHECK(dup.weight_params == 8.0 * 4096 * 2 * 14336);  // it still owns all 8
  // 16 tokens: 8·(1 − 0.75^16) = 7.92 → all 8.
  one.seq = 16;
  CHECK(find(layer_ops(m, 0, one, {1, false, 1, 1}), "expert_up").forward.gemm.batch == 8);
}

TEST_CASE("FP8 training quantizes the linear layers only") {
  // Transformer Engine's FP8 recipe: the transformer layers' linears run FP8; the attention core,
  // the MoE router and the output layer (Megatron-Core's ColumnParallelLinear, torchtitan's
  // filtered `output`) stay 16-bit.
  LayerShape shape;
  shape.seq = 4096;
  shape.dtype = DType::fp8;
  const auto m = load_model(source_path("workloads/models/mixtral-8x7b.json"));
  const auto ops = layer_ops(m, 0, shape, {2, true, 1, 1});
  for (const char* name : {"qkv_proj", "out_proj", "expert_up", "expert_down"})
    CHECK_MESSAGE(find(ops, name).forward.dtype == DType::fp8, name);
  CHECK(find(ops, "attention_core").forward.dtype == DType::bf16);
  CHECK(find(ops, "router").forward.dtype == DType::bf16);
  const auto& logits = find(head_ops(m, shape, {2, true, 1, 1}), "logits");
  CHECK(logits.forward.dtype == DType::bf16);
  CHECK(logits.backward_input.dtype == DType::bf16);
  // 16-bit A, B and C: 2·(4096·4096 + 16000·4096 + 4096·16000) bytes (vocab 32000 over TP 2).
  CHECK(logits.forward.bytes == 2.0 * (4096.0 * 4096 + 16000.0 * 4096 + 4096.0 * 16000));
  // Unfused attention's two GEMMs stay 16-bit too.
  shape.flash_attention = false;
  const auto unfused = layer_ops(m, 0, shape, {2, true, 1, 1});
  CHECK(find(unfused, "attention_scores").forward.dtype == DType::bf16);
  CHECK(find(unfused, "attention_values").forward.dtype == DType::bf16);
}

TEST_CASE("FP8 training with 16-bit routed experts (torchtitan's Float8 converter)") {
  // Only the routed experts' grouped GEMMs change: the same GEMMs as a 16-bit run, while the
  // linears stay FP8.
  const auto m = load_model(source_path("workloads/models/deepseek-v3.json"));
  const std::int64_t moe_layer = m.moe->first_dense_layers;
  LayerShape fp8;
  fp8.seq = 4096;
  fp8.dtype = DType::fp8;
  auto bf16 = fp8;
  bf16.dtype = DType::bf16;
  auto split = fp8;
  split.fp8_routed_experts = false;
  const Sharding sh{1, false, 1, 8};
  const auto ops = layer_ops(m, moe_layer, split, sh);
  const auto all16 = layer_ops(m, moe_layer, bf16, sh);
  const auto all8 = layer_ops(m, moe_layer, fp8, sh);
  for (const char* name : {"expert_up", "expert_down"}) {
    INFO(name);
    CHECK(find(ops, name).forward.dtype == DType::bf16);
    CHECK(find(ops, name).forward.bytes == find(all16, name).forward.bytes);
    CHECK(find(ops, name).backward_weight.dtype == DType::bf16);
    CHECK(find(all8, name).forward.dtype == DType::fp8);
  }
  for (const char* name : {"q_up_proj", "out_proj", "shared_expert_up", "shared_expert_down"})
    CHECK_MESSAGE(find(ops, name).forward.dtype == DType::fp8, name);
}

TEST_CASE("a parameter-count model has no ops") {
  const auto doc = Json::parse(R"({"params": 7e10})");
  const auto m = read_model(JsonRef::root(doc, "dense-70b.json"));
  CHECK_THROWS_AS(layer_ops(m, 0, {}, {}), Error);
}
