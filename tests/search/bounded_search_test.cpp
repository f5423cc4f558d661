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
  o.strategy.tune_split = true;  // as `meshsim search` runs: the bounds hold for tuned splits too
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
  std::size_t beyond_reach = 0;
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
    // The best of each TP degree: the same layout, or, for a degree whose best is beyond reach
    // of the K-th best (kAnchorReach), at least the value stated and at most the best simulated.
    auto best_per_tp = [](const SearchResult& r) {
      std::map<std::int64_t, const EvaluatedCandidate*> m;
      for (const auto& e : r.results)
        if (e.error.empty()) m.try_emplace(e.candidate.config.mesh.tp, &e);
      return m;
    };
    const auto want = best_per_tp(all), got = best_per_tp(top);
    const double kth = all.results[9].result.step_time_s;
    for (const auto& [degree, e] : want) {
      const std::int64_t tp = degree;  // a plain variable: INFO captures it (clang: no bindings)
      INFO("tp=" << tp);
      const double best = e->result.step_time_s;
      if (const auto far = top.tp_best_at_least.find(tp); far != top.tp_best_at_least.end()) {
        ++beyond_reach;
        CHECK(far->second <= best);
        CHECK(best > kAnchorReach * kth);
        if (got.contains(tp)) CHECK(got.at(tp)->result.step_time_s >= best);
      } else {
        REQUIRE(got.contains(tp));
        CHECK(got.at(tp)->candidate.label() == e->candidate.label());
      }
    }
    // And no degree is reported "at least" that the exhaustive search cannot run at all.
    for (const auto& [degree, at_least] : top.tp_best_at_least) CHECK(want.contains(degree));
    // The property: bound ≤ simulated step, for every candidate simulated, and each level of
    // the bound at most the next. One context for all of them, as a search keeps its contexts
    // (its prices are functions of their keys, so it changes no bound, only the time).
    CommContext context(topo);
    for (const auto& e : all.results) {
      if (!e.error.empty()) continue;
      INFO(e.candidate.label());
      const auto level = [&](BoundLevel l) {
        return candidate_lower_bound_s(topo, model, job, e.candidate, all_opt, &context, l);
      };
      const double full = level(BoundLevel::full);
      CHECK(full <= e.result.step_time_s);
      CHECK(level(BoundLevel::unloaded) <= full);
      CHECK(level(BoundLevel::chains) <= full);
    }
  }
  CHECK(beyond_reach > 0);  // the rule for far TP degrees is exercised
}

TEST_CASE("search bounds: linear in micro-batches, a stage at least its share, fill adds") {
  // The bound plays the schedule out at fixed pass times: once the pipeline is full, each more
  // micro-batch adds the busiest rank's work per micro-batch, so for a fixed layout b(m) = m·W + C
  // exactly, and b(3m) − b(2m) = b(2m) − b(m) = W. With pp 4 the busiest
  // rank does at least a quarter of the whole model's work per micro-batch (the average), and
  // its fill and tail (the other stages' first forward and last input-gradient pass) make the
  // intercept larger than pp 1's optimizer-only one.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const auto opt = options_for(SearchJob{2048, 0, DType::bf16, true});
  auto bound = [&](Mesh mesh, std::int64_t microbatches) {
    Candidate c;
    c.micro_batch = 1;
    c.config.mesh = mesh;
    const SearchJob job{2048, mesh.dp * microbatches, DType::bf16, true};
    return candidate_lower_bound_s(topo, model, job, c, opt);
  };
  const Mesh flat{8, 1, 1, 1, 1}, piped{2, 1, 4, 1, 1};
  const double w1 = (bound(flat, 8) - bound(flat, 4)) / 4;
  CHECK((bound(flat, 12) - bound(flat, 8)) / 4 == doctest::Approx(w1).epsilon(1e-9));
  const double c1 = bound(flat, 4) - 4 * w1;  // the optimizer step: positive
  CHECK(c1 > 0);
  const double w4 = (bound(piped, 16) - bound(piped, 8)) / 8;
  CHECK((bound(piped, 24) - bound(piped, 16)) / 8 == doctest::Approx(w4).epsilon(1e-9));
  CHECK(w4 >= w1 / 4 * (1 - 1e-12));
  CHECK(w4 < w1 / 4 * 1.25);  // 8 of 32 layers plus at most the head: not the whole model
  const double c4 = bound(piped, 8) - 8 * w4;
  CHECK(c4 > c1 / 4);  // fill + tail exceed a quarter of the optimizer
  // Full recompute adds a forward to every backward: the per-micro-batch work grows.
  Candidate rc;
  rc.micro_batch = 1;
  rc.config.mesh = flat;
  rc.config.recompute = Recompute::full;
  CHECK(candidate_lower_bound_s(topo, model, SearchJob{2048, 32, DType::bf16, true}, rc, opt) >
        bound(flat, 4));
}

TEST_CASE("search bounds: the collectives a layer's next kernel waits for count, never too much") {
  // TP 8 with sequence parallelism and no TP overlap (the megatron stack's default): each layer's
  // forward waits for two all-gathers and two reduce-scatters, so the bound with the layer
  // passes as chains exceeds the compute-only one, and stays below the simulated step.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{4096, 16, DType::bf16, true};
  const auto opt = options_for(job);
  Candidate c;
  c.micro_batch = 1;
  c.config.mesh = {1, 8, 1, 1, 1};
  c.config.sp = true;
  const auto s = setup_of(c, job, opt);
  const ComputeModel cm(topo.gpu, s.profile);
  const double compute_only = step_time_lower_bound(model, s.job, s.config, cm, s.strategy);
  const double chained = candidate_lower_bound_s(topo, model, job, c, opt);
  CHECK(chained > compute_only * 1.02);
  const auto simulated = simulate_training(topo, model, s);
  CHECK(chained <= simulated.step_time_s);
  // A mesh that does not match the cluster is bounded by compute alone.
  Candidate half = c;
  half.config.mesh = {1, 4, 1, 1, 1};
  const auto hs = setup_of(half, job, opt);
  CHECK(candidate_lower_bound_s(topo, model, job, half, opt) ==
        step_time_lower_bound(model, hs.job, hs.config, cm, hs.strategy));
}

TEST_CASE("search bounds: the data-parallel streams' collectives count, never too much") {
  // Llama 3.1 8B on two nodes, DP 16 across them, one micro-batch per GPU: ZeRO-1's last
  // gradient reduce-scatter runs after the last backward, before the optimizer, and ZeRO-3's
  // last layer's does too (its per-layer all-gathers stay under the compute here). The bound
  // with those streams priced is tighter than the one without (0.183 s against 0.170 s; 0.208
  // and 0.218 s simulated) and stays below the simulated step; with them at their unloaded
  // bounds (0.182 s) it lies between the two.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{2});
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{2048, 16, DType::bf16, true};
  const auto opt = options_for(job);
  for (const int zero : {1, 3}) {
    INFO("ZeRO-" << zero);
    Candidate c;
    c.micro_batch = 1;
    c.config.mesh = {16, 1, 1, 1, 1};
    c.config.zero = zero;
    const double without =
        candidate_lower_bound_s(topo, model, job, c, opt, nullptr, BoundLevel::chains);
    const double unloaded =
        candidate_lower_bound_s(topo, model, job, c, opt, nullptr, BoundLevel::unloaded);
    const double with = candidate_lower_bound_s(topo, model, job, c, opt, nullptr);
    const auto simulated = simulate_training(topo, model, setup_of(c, job, opt));
    CHECK(with > without * 1.05);
    CHECK(unloaded >= without);
    CHECK(with >= unloaded);
    CHECK(with <= simulated.step_time_s);
  }
}

TEST_CASE("search bounds: the anchor's rank is exact within reach of the K-th best, else flagged") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{4096, 64, DType::bf16, true};
  auto opt = options_for(job);
  const auto all = run_search(topo, model, job, {}, opt);
  std::vector<const EvaluatedCandidate*> ok;
  for (const auto& e : all.results)
    if (e.error.empty()) ok.push_back(&e);
  REQUIRE(ok.size() > 12);
  const auto enumeration = enumerate_search(topo, model, job, {}, opt);
  opt.top_k = 3;
  const auto bounded = [&](const std::string& anchor) {
    return evaluate_top_k(
        topo, model, job, enumeration.kept, opt,
        [&](const std::vector<Candidate>& cs, const SearchOptions& o) {
          return evaluate_candidates(topo, model, job, cs, o);
        },
        [](double v) { return v; }, anchor);
  };
  const double third = ok[2]->result.step_time_s;
  // The first layout after the top 3 within kAnchorReach of the third: every faster one is
  // simulated, so its rank among the simulated is its rank among all.
  std::size_t near = 3;
  while (near + 1 < ok.size() && ok[near]->result.step_time_s == third) ++near;
  REQUIRE(ok[near]->result.step_time_s <= kAnchorReach * third);
  auto ev = bounded(ok[near]->candidate.label());
  CHECK(ev.anchor_rank_exact);
  rank_results(ev.results);
  std::size_t rank = 0;
  for (std::size_t i = 0; i < ev.results.size(); ++i)
    if (ev.results[i].candidate.label() == ok[near]->candidate.label()) rank = i + 1;
  CHECK(rank == near + 1);
  // The slowest layout is beyond reach: flagged, and fewer layouts simulated than all.
  const auto far = bounded(ok.back()->candidate.label());
  REQUIRE(ok.back()->result.step_time_s > kAnchorReach * third);
  CHECK_FALSE(far.anchor_rank_exact);
  CHECK(far.results.size() < ok.size());
}

TEST_CASE("search bounds: past the time budget nothing more is sharpened or simulated") {
  // 70B on four SuperPOD nodes: several rounds, later ones sharpened by their data-parallel part.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{4});
  const auto model = load_workload(model_path("llama3.1-70b")).model;
  const SearchJob job{2048, 64, DType::bf16, true};
  auto opt = options_for(job);
  opt.top_k = 3;
  // The runs share their contexts' prices (which change no bound or step, only the time).
  opt.contexts = std::make_shared<ContextPool>(topo);
  const auto enumeration = enumerate_search(topo, model, job, {}, opt);
  // The budget runs out during round `last` (`o` is `opt`, whose deadline each round reads).
  const auto run = [&](std::size_t last) {
    std::size_t rounds = 0;
    opt.deadline.reset();
    return evaluate_top_k(
        topo, model, job, enumeration.kept, opt,
        [&](const std::vector<Candidate>& cs, const SearchOptions& o) {
          auto r = evaluate_candidates(topo, model, job, cs, o);
          if (++rounds == last)
            opt.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
          return r;
        },
        [](double v) { return v; }, "");
  };
  const auto count = [](const BoundedEvaluation& ev) {
    std::size_t simulated = 0;
    for (const auto& e : ev.results) simulated += !not_simulated(e);
    return std::make_pair(simulated, ev.results.size() - simulated);
  };
  const std::size_t round = std::max<std::size_t>(2 * opt.top_k, 32);
  // Every round's candidates are sharpened before it runs, the first round's too.
  const auto second = run(2);
  const auto first = run(1);
  CHECK(first.sharpened > 0);
  CHECK(count(second).first > round);
  // Cut in the first: nothing sharpened after it (the uncut run sharpened the second round's
  // candidates), nothing simulated after it, the rest reported.
  CHECK(first.sharpened < second.sharpened);
  CHECK(count(first).first == round);
  CHECK(count(first).second > 0);
}

TEST_CASE(
    "search bounds: CUDA graphs' shorter kernel gaps and the host's launches, never too much") {
  // A profile that measured 40 µs between kernels launched one by one (a slow host's gap, large
  // enough that a bound pricing it inside a graph exceeds the step) and 1 µs inside a CUDA graph;
  // Megatron capturing nothing, each layer pass, or the whole step. The bounds take the graph's gap
  // where the trace does, so none exceeds the simulated step; with 10 µs of host time a launch as
  // well they stay below it (the host's launches only lengthen a step).
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{2048, 16, DType::bf16, true};
  for (const auto graphs : {CudaGraphs::none, CudaGraphs::layer, CudaGraphs::iteration}) {
    auto opt = options_for(job);
    opt.strategy.stack.cuda_graphs = graphs;
    CalibrationProfile p;
    p.gpu = topo.gpu.model;
    p.source = "test";
    p.kernel_gap_s = 40e-6;
    p.graph_kernel_gap_s = 1e-6;
    for (const bool host : {false, true}) {
      if (host) p.host_per_kernel_s = 10e-6;
      opt.profile = p;
      for (const Mesh mesh : {Mesh{8, 1, 1, 1, 1}, Mesh{1, 8, 1, 1, 1}, Mesh{1, 2, 4, 1, 1}}) {
        Candidate c;
        c.micro_batch = 1;
        c.config.mesh = mesh;
        c.config.sp = mesh.tp > 1;
        INFO(name_of(graphs) << " " << c.label() << (host ? " with host launches" : ""));
        const auto simulated = simulate_training(topo, model, setup_of(c, job, opt));
        for (const auto level : {BoundLevel::chains, BoundLevel::unloaded, BoundLevel::full})
          CHECK(candidate_lower_bound_s(topo, model, job, c, opt, nullptr, level) <=
                simulated.step_time_s);
      }
    }
  }
}

TEST_CASE("search bounds: FSDP syncing once per pipeline step, never above the step") {
  // torchtitan's FSDP under PP reduces a chunk's gradients after its last backward and, without
  // reshard after forward, gathers each layer once a step: the bounds count them so.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_workload(model_path("llama3.1-8b")).model;
  const SearchJob job{2048, 32, DType::bf16, true};
  auto opt = options_for(job);
  opt.strategy.stack = *bundled_stack("torchtitan");
  opt.memory.recipe = stack_recipe(opt.strategy.stack, job.dtype);
  for (const bool reshard : {false, true})
    for (const auto kind : {ScheduleKind::one_f_one_b, ScheduleKind::zero_bubble}) {
      Candidate c;
      c.micro_batch = 1;
      c.config.mesh = Mesh{4, 1, 2, 1, 1};
      c.config.zero = 3;
      c.config.reshard_after_forward = reshard;
      c.config.schedule = {kind, 1};
      INFO(c.label() << std::string(reshard ? " reshard" : " no reshard"));
      const auto simulated = simulate_training(topo, model, setup_of(c, job, opt));
      for (const auto level : {BoundLevel::chains, BoundLevel::unloaded, BoundLevel::full}) {
        const int lv = static_cast<int>(level);
        INFO("level " << lv);
        CHECK(candidate_lower_bound_s(topo, model, job, c, opt, nullptr, level) <=
              simulated.step_time_s);
      }
      // The full bound is not vacuous: within half the step.
      CHECK(candidate_lower_bound_s(topo, model, job, c, opt, nullptr, BoundLevel::full) >
            0.5 * simulated.step_time_s);
    }
}
