// Selective recompute regions resolved against a layer: hand-derived bytes from the catalogue's
// stored tensors (16-bit activations) for Mixtral 8x7B, Llama 3.1 8B and DeepSeek-V3.
#include "model/recompute.hpp"

#include <doctest/doctest.h>

#include "model/model_loader.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {

std::vector<OpSpec> layer(const std::string& model, std::int64_t index, bool flash = true) {
  LayerShape shape;
  shape.seq = 4096;
  shape.flash_attention = flash;
  return layer_ops(load_model(source_path("workloads/models/" + model + ".json")), index, shape,
                   {});
}

// Megatron's output-discarding layernorm module: MLA's input norm, an MoE layer's pre-MLP norm.
const std::vector<RecomputeUnit> kLayernorm{
    {{"input_norm"}, {"q_down_proj", "q_proj", "kv_down_proj"}, "kv_down_proj"},
    {{"post_attention_norm"}, {"router.input"}, "router"}};

}  // namespace

TEST_CASE("no regions: Korthikanti's attention scores, nothing with fused attention") {
  const auto flash = resolve_recompute(layer("llama3.1-8b", 0), {});
  CHECK(flash.ops == std::vector<std::string>{"attention_scores", "softmax", "attention_values"});
  CHECK(flash.freed_bytes == 0);
  // Unfused, no dropout: the softmax output, 2 bytes × 32 heads × 4096² scores.
  const auto unfused = resolve_recompute(layer("llama3.1-8b", 0, false), {});
  CHECK(unfused.freed_bytes == 2.0 * 32 * 4096 * 4096);
}

TEST_CASE("a region without frees drops what its ops store") {
  // Llama 3.1 8B, 4096 tokens, ffn 14336: SwiGLU stores its gate and up inputs (2 × 14336 wide),
  // the down projection its 14336-wide input: 2 B × 4096 × (2 + 1) × 14336.
  const auto r =
      resolve_recompute(layer("llama3.1-8b", 0), {{{"mlp_activation", "mlp_down"}, {}, ""}});
  CHECK(r.ops == std::vector<std::string>{"mlp_activation", "mlp_down"});
  CHECK(r.freed_bytes == 2.0 * 4096 * 3 * 14336);
}

TEST_CASE("output-discarding regions free the tensor their consumer stores") {
  const auto mixtral = layer("mixtral-8x7b", 0);
  SUBCASE("moe_act: the activation's output, which the down projection stores") {
    // 4096 tokens × top-2 = 8192 routed copies × 14336 columns × 2 B.
    const auto r =
        resolve_recompute(mixtral, {{{"expert_activation"}, {"expert_down"}, "expert_activation"}});
    CHECK(r.ops == std::vector<std::string>{"expert_activation"});
    CHECK(r.freed_bytes == 2.0 * 8192 * 14336);
  }
  SUBCASE(
      "layernorm: only the MoE pre-MLP norm of a GQA layer; the router's input, not its "
      "fp32 probabilities") {
    const auto r = resolve_recompute(mixtral, kLayernorm);
    CHECK(r.ops == std::vector<std::string>{"post_attention_norm"});
    CHECK(r.freed_bytes == 2.0 * 4096 * 4096);
  }
  SUBCASE("layernorm acts on no norm of a dense GQA layer (Transformer Engine fuses both)") {
    const auto r = resolve_recompute(layer("llama3.1-8b", 0), kLayernorm);
    CHECK(r.ops.empty());
    CHECK(r.freed_bytes == 0);
  }
  SUBCASE("mla_up_proj: the Q, K and V the attention core stores, not its log-sum-exp") {
    // DeepSeek-V3: 128 heads, Q and K 192 wide (128 + 64 rotary), V 128; 4096 tokens, 2 B.
    const std::vector<RecomputeUnit> up{
        {{"q_up_proj", "kv_up_proj", "rope"}, {"attention_core.input"}, "kv_up_proj"}};
    const auto r = resolve_recompute(layer("deepseek-v3", 5), up);
    CHECK(r.ops == std::vector<std::string>{"q_up_proj", "kv_up_proj", "rope"});
    CHECK(r.freed_bytes == 2.0 * 4096 * 128 * (192 + 192 + 128));
    // A GQA layer has no up projections: nothing, not its rope.
    CHECK(resolve_recompute(mixtral, up).ops.empty());
    // DeepSeek-V3's layernorm: the input norm's output, which the Q down projection stores
    // (7168 wide), and the pre-MLP norm's (an MoE layer).
    CHECK(resolve_recompute(layer("deepseek-v3", 5), kLayernorm).freed_bytes ==
          2.0 * 4096 * 7168 * 2);
  }
}

TEST_CASE("a tensor two regions name is freed once") {
  // Megatron's moe_act twice over (a stack file may list a module's region in two modules).
  const RecomputeUnit act{{"expert_activation"}, {"expert_down"}, ""};
  const auto r = resolve_recompute(layer("mixtral-8x7b", 0), {act, act});
  CHECK(r.ops == std::vector<std::string>{"expert_activation"});
  CHECK(r.freed_bytes == 2.0 * 8192 * 14336);
}

TEST_CASE("moe: the whole MoE layer re-runs, its collectives with it; the router keeps its input") {
  // Megatron's moe module (workloads/stacks/megatron.json).
  const RecomputeUnit moe{
      {"router", "moe_dispatch", "expert_up", "expert_activation", "expert_down", "moe_combine",
       "shared_expert_up", "shared_expert_activation", "shared_expert_down"},
      {"expert_up", "expert_activation", "expert_down", "moe_combine", "shared_expert_up",
       "shared_expert_activation", "shared_expert_down"},
      "router",
      true};
  // Mixtral: 8192 routed copies; expert_up stores its 4096-wide input, the activation its
  // 2 × 14336-wide input, expert_down its 14336-wide input, the combine the 4096-wide expert
  // outputs: 2 B × 8192 × (4096 + 28672 + 14336 + 4096).
  const auto r = resolve_recompute(layer("mixtral-8x7b", 0), {moe});
  CHECK(r.freed_bytes == 2.0 * 8192 * (4096 + 28672 + 14336 + 4096));
  CHECK(r.ops_with_collectives == moe.ops);
  // A dense layer has no router: the region does not act.
  const auto dense = resolve_recompute(layer("llama3.1-8b", 0), {moe});
  CHECK(dense.ops.empty());
  CHECK(dense.freed_bytes == 0);
}

TEST_CASE("acts_on: a region acts on a model with a layer that has the op it needs") {
  const auto llama = load_model(source_path("workloads/models/llama3.1-8b.json"));
  const auto deepseek = load_model(source_path("workloads/models/deepseek-v3.json"));
  const RecomputeUnit router{{"router"}, {}, "router", false};
  const RecomputeUnit mlp{{"mlp_up"}, {}, "mlp_up", false};
  CHECK(!acts_on(llama, {router}));
  CHECK(acts_on(llama, {mlp}));
  CHECK(acts_on(llama, {router, mlp}));                      // one of them is enough
  CHECK(acts_on(deepseek, {router}));                        // its MoE layers
  CHECK(acts_on(deepseek, {mlp}));                           // its first three layers are dense
  CHECK(acts_on(llama, {{{"input_norm"}, {}, "", false}}));  // no `needs`: every layer
}
