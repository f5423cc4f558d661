// A search's candidates run their stack's recompute policies: memory is checked with them, and
// selective recompute is dominated by none only where the stack's policy frees nothing.
#include <doctest/doctest.h>

#include <algorithm>

#include "model/workload.hpp"
#include "search/search.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::model_path;
using meshsim::test::topology_path;

namespace {

constexpr const char* kDominated = "dominated (selective recompute with fused attention)";

Enumeration enumerate_on(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                         const Stack& stack) {
  SearchOptions o;
  o.strategy.stack = stack;
  o.memory.recipe = stack_recipe(stack, job.dtype);
  return enumerate_search(topo, model, job, {}, o);
}

std::size_t selective_count(const Enumeration& e) {
  return static_cast<std::size_t>(std::count_if(e.kept.begin(), e.kept.end(), [](const auto& c) {
    return c.config.recompute == Recompute::selective;
  }));
}

}  // namespace

TEST_CASE("search: selective candidates run the stack's policy") {
  // Llama 3.1 8B at 8K on one DGX H100.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{8192, 64, DType::bf16, true};
  // Megatron's core-attention checkpoint frees nothing with fused attention: never tried.
  const auto mg = enumerate_on(topo, model, job, *bundled_stack("megatron"));
  CHECK(mg.rejected.at(kDominated) > 0);
  CHECK(selective_count(mg) == 0);
  // torchtitan's op SAC drops most of a block's tensors: tried where no recompute does not fit,
  // with its regions.
  const auto& tt = *bundled_stack("torchtitan");
  const auto op = enumerate_on(topo, model, job, tt);
  CHECK_FALSE(op.rejected.contains(kDominated));
  CHECK(selective_count(op) > 0);
  for (const auto& c : op.kept) {
    if (c.config.recompute != Recompute::selective) continue;
    CHECK(c.config.recompute_units == tt.policy("op")->units);
    CHECK(c.config.recompute_modules.empty());
  }
}

TEST_CASE("search: --recompute-modules makes the selective candidates recompute them") {
  // Mixtral 8x7B at 4K on two DGX H100 nodes: moe_act and layernorm free 8 GiB of a stage's
  // activations (memory_cli_test), which lets more layouts fit with less sharding.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{2});
  const auto model = load_workload(model_path("mixtral-8x7b")).model;
  const SearchJob job{4096, 256, DType::bf16, true};
  const auto& mg = *bundled_stack("megatron");
  const auto modules = with_recompute_modules(mg, {"moe_act", "layernorm"}, "--recompute-modules");
  CHECK(modules.name == "megatron");
  CHECK(modules.policy_for(Recompute::selective)->name == "selective");
  CHECK(modules.recompute.size() == mg.recompute.size());
  const auto plain = enumerate_on(topo, model, job, mg);
  const auto e = enumerate_on(topo, model, job, modules);
  CHECK(selective_count(plain) == 0);
  CHECK(selective_count(e) > 0);
  for (const auto& c : e.kept)
    if (c.config.recompute == Recompute::selective)
      CHECK(c.config.recompute_modules == std::vector<std::string>{"moe_act", "layernorm"});
}

TEST_CASE(
    "search: full-recompute candidates recompute the fewest layers that fit (Megatron's block, "
    "torchtitan's layer frequency)") {
  // Llama 3.1 70B at 4K on four DGX H100 nodes.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{4});
  const auto model = load_workload(model_path("llama3.1-70b")).model;
  const SearchJob job{4096, 64, DType::bf16, true};
  const double capacity = topo.gpu.hbm_bytes.as_double();
  // The worst stage's bytes of candidate `c` on `stack` with `edit` applied to its config, the
  // layers split as the stack's framework splits them.
  const auto worst = [&](const Candidate& c, const Stack& stack, auto edit) {
    MemoryOptions mo;
    mo.recipe = stack_recipe(stack, job.dtype);
    mo.flash_attention = true;
    auto cfg = c.config;
    edit(cfg);
    const TrainingMemoryJob mj{job.seq, job.global_batch, c.micro_batch, job.dtype,
                               framework_chunk_layers(stack.pipeline_split, model,
                                                      model_chunks(cfg), virtual_stages(cfg))};
    return worst_stage(training_memory_per_stage(model, mj, cfg, mo)).total();
  };
  const auto& mg = *bundled_stack("megatron");
  REQUIRE(mg.recompute_block);
  const auto e = enumerate_on(topo, model, job, mg);
  std::size_t blocks = 0;
  for (const auto& c : e.kept) {
    if (c.config.recompute_block == 0) continue;
    ++blocks;
    INFO(c.label());
    CHECK(c.config.recompute == Recompute::full);
    const auto n = c.config.recompute_block;
    CHECK(c.label().find("recompute=full-block" + std::to_string(n)) != std::string::npos);
    // It fits, one layer fewer does not, and it is fewer than a chunk's layers.
    CHECK(worst(c, mg, [&](ParallelConfig& cfg) { cfg.recompute_block = n; }) <= capacity);
    if (n > 1)
      CHECK(worst(c, mg, [&](ParallelConfig& cfg) { cfg.recompute_block = n - 1; }) > capacity);
    const auto chunks = c.config.mesh.pp * c.config.schedule.virtual_stages;
    CHECK(n < (model.layers + chunks - 1) / chunks);
  }
  CHECK(blocks > 0);
  // Megatron has no layer frequency, torchtitan no block method.
  for (const auto& c : e.kept) CHECK(c.config.recompute_every == 1);
  const auto& tt = *bundled_stack("torchtitan");
  REQUIRE(tt.recompute_layer_frequency);
  std::size_t every = 0;
  for (const auto& c : enumerate_on(topo, model, job, tt).kept) {
    CHECK(c.config.recompute_block == 0);
    if (c.config.recompute_every == 1) continue;
    ++every;
    INFO(c.label());
    CHECK(c.config.recompute == Recompute::full);
    const auto n = c.config.recompute_every;
    CHECK(c.label().find("recompute=full-every" + std::to_string(n)) != std::string::npos);
    // It fits and recomputing every (N + 1)-th layer does not.
    CHECK(worst(c, tt, [&](ParallelConfig& cfg) { cfg.recompute_every = n; }) <= capacity);
    CHECK(worst(c, tt, [&](ParallelConfig& cfg) { cfg.recompute_every = n + 1; }) > capacity);
  }
  CHECK(every > 0);
}
