// A pipelined layout whose stack's own split leaves a stage over memory is kept where a split of
// the stack's end switches fits (the search tunes the split with them, as `meshsim search` runs),
// is simulated on the least busy split that fits, and dominates no other ZeRO stage or recompute
// policy of the layout (that split can be busier than the stack's own).
#include <doctest/doctest.h>

#include <algorithm>

#include "memory/memory_model.hpp"
#include "model/workload.hpp"
#include "search/search.hpp"
#include "strategy/pipeline_split.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::model_path;
using meshsim::test::topology_path;

TEST_CASE("search: a layout whose own split does not fit memory is kept with layers moved") {
  // Llama 3.1 70B at 8K, 64 sequences on 4 DGX H100 nodes, tp=4 pp=4 cp=2 interleaved × 2, no
  // recompute, micro-batch 1: ZeRO-0 and ZeRO-1 leave the first stage over 80 GiB on Megatron's
  // own 10-layer chunks; ZeRO-2 fits.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{4});
  const auto model = load_workload(model_path("llama3.1-70b")).model;
  const SearchJob job{8192, 64, DType::bf16, true};
  SearchSpace space;
  space.tp = 4;
  space.pp = 4;
  space.cp = 2;
  space.mbs = 1;
  space.recompute = Recompute::none;
  space.schedule = Schedule{ScheduleKind::interleaved, 2};
  SearchOptions o;
  o.threads = 2;
  o.strategy.stack = default_stack();
  o.memory.recipe = stack_recipe(o.strategy.stack, job.dtype);
  const auto zeros = [](const Enumeration& e) {
    std::vector<std::int32_t> z;
    for (const auto& c : e.kept) z.push_back(c.config.zero);
    std::sort(z.begin(), z.end());
    return z;
  };
  const double capacity = topo.gpu.hbm_bytes.as_double();

  // The stack's own split only: ZeRO-2 is kept and dominates ZeRO-3.
  const auto plain = enumerate_search(topo, model, job, space, o);
  CHECK(zeros(plain) == std::vector<std::int32_t>{2});
  CHECK(plain.rejected.at("does not fit memory") == 2);
  CHECK(plain.moved_layers == 0);

  // Tuned: ZeRO-1 fits with layers moved off the first stage and is kept beside ZeRO-2, which it
  // does not dominate; ZeRO-0 fits on no split of the switches.
  o.strategy.tune_split = true;
  const auto tuned = enumerate_search(topo, model, job, space, o);
  CHECK(zeros(tuned) == std::vector<std::int32_t>{1, 2});
  CHECK(tuned.rejected.at("does not fit memory") == 1);
  CHECK(tuned.moved_layers == 1);

  const auto moved = std::find_if(tuned.kept.begin(), tuned.kept.end(),
                                  [](const Candidate& c) { return c.config.zero == 1; });
  REQUIRE(moved != tuned.kept.end());
  const auto setup = setup_of(*moved, job, o);
  const auto own = framework_chunk_layers(o.strategy.stack.pipeline_split, model, moved->config);
  CHECK(worst_stage(setup_memory_per_stage(model, setup, own)).total() > capacity);
  // Simulated on a split of the switches that fits, and said to be chosen for memory.
  const auto r = simulate_training(topo, model, setup);
  CHECK(r.chunk_layers != own);
  CHECK(worst_stage(setup_memory_per_stage(model, setup, r.chunk_layers)).total() <= capacity);
  const auto splits = end_switch_splits(o.strategy.stack.pipeline_split, model, 8, 2);
  CHECK(std::find(splits.begin(), splits.end(), r.chunk_layers) != splits.end());
  CHECK(r.tuned_split_note.find("to fit memory") != std::string::npos);
  // Its first stage holds fewer layers than the stack's own 20.
  CHECK(r.chunk_layers[0] + r.chunk_layers[4] < 20);
}
