// Exact top-K by bounds (issue 17): the bounded search ranks the same top K, the same best per TP
// degree and the same anchor rank as simulating every candidate, and no candidate's step-time
// bound exceeds its simulated step.
#include <doctest/doctest.h>

#include <map>

#include "memory/memory_model.hpp"
#include "model/workload.hpp"
#include "search/search.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::model_path;
using meshsim::test::topology_path;

namespace {

struct Case {
  const char* topology;
  std::int32_t nodes;
  const char* model;
  std::int64_t seq, gbs;
};

SearchOptions options_for(const SearchJob& job) {
  SearchOptions o;
  o.threads = 2;
  o.strategy.stack = default_stack();
  o.memory.recipe = stack_recipe(o.strategy.stack, job.dtype);
  return o;
}

}  // namespace

TEST_CASE("search bounds: the top 10 is that of simulating everything; no bound exceeds its step") {
  // Dense on one node, MoE and PP-heavy on two, the 2:1 fat tree on four.
  const Case cases[] = {
      {"dgx-h100.json", 1, "llama3.1-8b", 4096, 64},
      {"dgx-h100-superpod.json", 2, "mixtral-8x7b", 4096, 64},
      {"dgx-h100-superpod.json", 2, "gpt-mcore-16b", 2048, 128},
      {"dgx-h100-superpod-2to1.json", 4, "llama3.1-8b", 2048, 64},
  };
  for (const auto& c : cases) {
    INFO(c.model << " on " << c.nodes << " × " << c.topology);
    const auto topo = load_topology(topology_path(c.topology), TopologyOptions{c.nodes});
    const auto model = load_workload(model_path(c.model)).model;
    const SearchJob job{c.seq, c.gbs, DType::bf16, true};
    auto all_opt = options_for(job);
    const auto all = run_search(topo, model, job, {}, all_opt);
    auto top_opt = options_for(job);
    top_opt.top_k = 10;
    const auto top = run_search(topo, model, job, {}, top_opt);
    // Some candidates were left out, and they are counted as such.
    REQUIRE(top.enumeration.rejected.contains(kBoundedOut));
    CHECK(top.results.size() + top.enumeration.rejected.at(kBoundedOut) == all.results.size());
    // The ranked top 10: the same layouts with the same step times, to the bit.
    REQUIRE(all.results.size() >= 10);
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(top.results[i].candidate.label() == all.results[i].candidate.label());
      CHECK(top.results[i].result.step_time_s == all.results[i].result.step_time_s);
    }
    // The best of each TP degree.
    auto best_per_tp = [](const SearchResult& r) {
      std::map<std::int64_t, std::string> m;
      for (const auto& e : r.results)
        if (e.error.empty() && !m.contains(e.candidate.config.mesh.tp))
          m[e.candidate.config.mesh.tp] = e.candidate.label();
      return m;
    };
    CHECK(best_per_tp(top) == best_per_tp(all));
    // The property: bound ≤ simulated step, for every candidate simulated.
    for (const auto& e : all.results) {
      if (!e.error.empty()) continue;
      INFO(e.candidate.label());
      CHECK(candidate_lower_bound_s(topo, model, job, e.candidate, all_opt) <=
            e.result.step_time_s);
    }
  }
}

TEST_CASE("search bounds: the step-time bound of one layout, by hand") {
  // 1F1B on 4 stages: rank 3's work is m (f + b) per stage; before it the forward of stages 0-2,
  // after it their input-gradient passes. With equal stages, the classic (m + p − 1)(f + b) less
  // the three weight-gradient passes of the tail, plus nothing for the optimizer (shorter than
  // the tail). Checked against the bound's own parts: bound ≥ m (f + b) and bound ≤ (m + 3)(f + b).
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{2048, 32, DType::bf16, true};
  auto opt = options_for(job);
  Candidate pp4;
  pp4.micro_batch = 1;
  pp4.config.mesh = {2, 1, 4, 1, 1};  // dp 2, pp 4: 16 micro-batches per step
  const double with_pp = candidate_lower_bound_s(topo, model, job, pp4, opt);
  Candidate flat = pp4;
  flat.config.mesh = {8, 1, 1, 1, 1};  // the same work per micro-batch on one stage: 4 per step
  const double no_pp = candidate_lower_bound_s(topo, model, job, flat, opt);
  // no_pp = 4 (F + B) + optimizer over all 32 layers; with_pp ≈ (16 + 3)(F + B)/4 per stage.
  CHECK(with_pp > no_pp);
  CHECK(with_pp < no_pp * (16.0 + 3.0) / 16.0 * 1.01 + no_pp * 0.05);
  // Full recompute adds a forward to every backward: the bound grows.
  Candidate rc = flat;
  rc.config.recompute = Recompute::full;
  CHECK(candidate_lower_bound_s(topo, model, job, rc, opt) > no_pp);
}
