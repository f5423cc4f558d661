#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "network/collective_runner.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {

// When each plan ends, all of them started together on the idle network.
std::vector<Time> end_times(PricingScratch& scratch, const std::vector<CollectivePlan>& plans) {
  std::vector<Time> ends(plans.size(), Time::max());
  scratch.net.renumber_flows();
  const Time start = scratch.sim.now();
  for (std::size_t i = 0; i < plans.size(); ++i)
    run_collective(scratch.net, scratch.sim, plans[i],
                   [&ends, &scratch, i, start] { ends[i] = scratch.sim.now() - start; });
  scratch.sim.run();
  return ends;
}

std::size_t link_uses(const std::vector<CollectivePlan>& plans) {
  std::size_t n = 0;
  for (const auto& p : plans)
    for (const auto& phase : p.phases)
      for (const auto& f : phase) n += f.links.size();
  return n;
}

}  // namespace

TEST_CASE("drop_unshared_links keeps shared links and the unshared ones the solver would pick") {
  // Five directed links of one capacity c, ids l0 < ... < l4. Flow A crosses l3 (weight 2), l0
  // (shared with flow B), l2 (weight 2) and l1: its unshared shares are c/2, c/2, c. Both solvers
  // would pick l3, the first of least share in its list (ties go to the link first touched,
  // whatever the ids): it stays, l2 and l1 go. Flow C alone on l4 keeps it.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  PricingScratch scratch(topo);
  std::vector<std::uint32_t> same;
  for (std::uint32_t l = 0; l < topo.directed_edge_count() && same.size() < 5; ++l)
    if (scratch.net.capacity_Bps(l) == scratch.net.capacity_Bps(0)) same.push_back(l);
  REQUIRE(same.size() == 5);
  const auto l0 = same[0], l1 = same[1], l2 = same[2], l3 = same[3], l4 = same[4];
  CollectivePlan one, two;
  one.phases = {{PlannedFlow{{{l3, 2.0}, {l0, 1.0}, {l2, 2.0}, {l1, 1.0}}, 1e6}}};
  two.phases = {{PlannedFlow{{{l0, 1.0}}, 1e6}}, {PlannedFlow{{{l4, 1.0}}, 1e6}}};
  std::vector<CollectivePlan> plans{one, two};
  drop_unshared_links(plans, scratch);
  CHECK(plans[0].phases[0][0].links == FlowLinks{{l3, 2.0}, {l0, 1.0}});
  CHECK(plans[1].phases[0][0].links == FlowLinks{{l0, 1.0}});
  CHECK(plans[1].phases[1][0].links == FlowLinks{{l4, 1.0}});
  // The scratch counts are left at zero: the same call again sees the same sharing.
  CHECK(std::all_of(scratch.flows_on_link.begin(), scratch.flows_on_link.end(),
                    [](std::uint32_t n) { return n == 0; }));
}

TEST_CASE("drop_unshared_links leaves every end time unchanged to the picosecond") {
  // Copies of one collective run together, as the folded pricing runs them: DP rings and trees
  // across a 64-node SuperPOD and a 2:1 one, all-to-alls, 2 copies (the solver's scan for few
  // flows) and 8 (its heap). Each plan's end time with the pruned links equals the unpruned one
  // exactly, with fewer link uses.
  for (const char* file : {"dgx-h100-superpod.json", "dgx-h100-superpod-2to1.json"}) {
    const auto topo = load_topology(topology_path(file));
    Router router(topo);
    PricingScratch scratch(topo);
    struct Case {
      CollectiveOp op;
      CollectiveAlgo algo;
      std::int32_t stride, size;
    };
    for (const auto& c : {Case{CollectiveOp::all_reduce, CollectiveAlgo::ring, 8, 64},
                          Case{CollectiveOp::all_reduce, CollectiveAlgo::tree, 8, 64},
                          Case{CollectiveOp::reduce_scatter, CollectiveAlgo::ring, 16, 32},
                          Case{CollectiveOp::all_to_all, CollectiveAlgo::direct, 8, 16}})
      for (std::int32_t copies : {2, 8}) {
        CAPTURE(std::string(file));
        CAPTURE(name_of(c.op));
        CAPTURE(copies);
        std::vector<CollectivePlan> plans;
        for (std::int32_t k = 0; k < copies; ++k) {
          CollectiveCall call{c.op, {}, 3e8 + 1e7 * k};
          for (std::int32_t i = 0; i < c.size; ++i) call.ranks.push_back(k + i * c.stride);
          auto plan = plan_collective(topo, router, call, c.algo, Protocol::simple);
          REQUIRE(plan);
          plans.push_back(std::move(*plan));
        }
        const auto before = end_times(scratch, plans);
        auto pruned = plans;
        drop_unshared_links(pruned, scratch);
        // Point-to-point flows of an all-to-all share every link with another pair: nothing goes.
        if (c.op == CollectiveOp::all_to_all)
          CHECK(link_uses(pruned) == link_uses(plans));
        else
          CHECK(link_uses(pruned) < link_uses(plans));
        CHECK(end_times(scratch, pruned) == before);
      }
  }
}

namespace {

// `copies` data-parallel rings of `size` GPUs, one per GPU slot of a node, over nodes
// [first_node, first_node + size): what the folded pricing runs for one stage's DP group.
std::vector<CollectivePlan> dp_rings(const Topology& topo, Router& router, std::int32_t first_node,
                                     std::int32_t copies, std::int32_t size, double bytes) {
  std::vector<CollectivePlan> plans;
  for (std::int32_t k = 0; k < copies; ++k) {
    CollectiveCall call{CollectiveOp::reduce_scatter, {}, bytes};
    for (std::int32_t i = 0; i < size; ++i) call.ranks.push_back((first_node + i) * 8 + k);
    auto plan = plan_collective(topo, router, call, CollectiveAlgo::ring, Protocol::simple);
    REQUIRE(plan);
    plans.push_back(std::move(*plan));
  }
  return plans;
}

}  // namespace

TEST_CASE("plans with equal run signatures end at the same times, whatever ran before") {
  // One stage's DP rings on the first 32 nodes of a SuperPOD and the next stage's on the other
  // 32: other nodes and other link ids, wired alike, so the same signature; and their end times
  // equal to the picosecond. Another size or another group shape changes the signature.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"));
  Router router(topo);
  PricingScratch scratch(topo);
  auto first = dp_rings(topo, router, 0, 4, 32, 3e8);
  auto second = dp_rings(topo, router, 32, 4, 32, 3e8);
  auto bigger = dp_rings(topo, router, 32, 4, 32, 4e8);
  auto shorter = dp_rings(topo, router, 32, 4, 16, 3e8);
  for (auto* p : {&first, &second, &bigger, &shorter}) drop_unshared_links(*p, scratch);
  const auto sig = run_signature(first, scratch);
  CHECK(run_signature(second, scratch).words == sig.words);
  CHECK(run_signature(second, scratch).hash == sig.hash);
  CHECK(run_signature(bigger, scratch).words != sig.words);
  CHECK(run_signature(shorter, scratch).words != sig.words);
  // The renaming scratch is left at zero for the next call.
  CHECK(std::all_of(scratch.link_rank.begin(), scratch.link_rank.end(),
                    [](std::uint32_t r) { return r == 0; }));
  const auto ends = end_times(scratch, first);
  CHECK(end_times(scratch, second) == ends);
  // After another run (its flows freed in another order) the same plans end at the same times
  // as on a fresh network: the flow ids are renumbered first.
  PricingScratch fresh(topo);
  end_times(scratch, bigger);
  end_times(scratch, shorter);
  CHECK(end_times(scratch, first) == end_times(fresh, first));

  RunTimeCache cache;
  CHECK_FALSE(cache.find(sig));
  cache.insert(sig, ends.front());
  CHECK(cache.find(run_signature(second, scratch)) == ends.front());
  CHECK_FALSE(cache.find(run_signature(bigger, scratch)));
}

TEST_CASE("plans whose links are held elsewhere sign as their dropped copies do") {
  // The folded pricing keeps each copy's links in a cache and signs the run without copying them
  // (LinkedPlan); on a miss it runs dropped_plans. Both must describe the same run.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"));
  Router router(topo);
  PricingScratch scratch(topo);
  const auto plans = dp_rings(topo, router, 8, 6, 24, 2e8);
  std::vector<LinkedPlan> linked;
  for (const auto& p : plans) {
    auto links = std::make_shared<std::vector<std::vector<FlowLinks>>>();
    LinkedPlan l{p, nullptr};
    for (auto& phase : l.plan.phases) {
      auto& out = links->emplace_back();
      for (auto& f : phase) {
        out.push_back(f.links);
        f.links.clear();
      }
    }
    l.links = std::move(links);
    linked.push_back(std::move(l));
  }
  auto dropped = plans;
  drop_unshared_links(dropped, scratch);
  const auto from_cache = dropped_plans(linked, scratch);
  CHECK(link_uses(from_cache) == link_uses(dropped));
  CHECK(link_uses(from_cache) < link_uses(plans));
  for (std::size_t c = 0; c < plans.size(); ++c)
    for (std::size_t ph = 0; ph < plans[c].phases.size(); ++ph)
      for (std::size_t k = 0; k < plans[c].phases[ph].size(); ++k)
        CHECK(from_cache[c].phases[ph][k].links == dropped[c].phases[ph][k].links);
  const auto sig = run_signature(linked, scratch);
  CHECK(sig.words == run_signature(dropped, scratch).words);
  CHECK(sig.hash == run_signature(dropped, scratch).hash);
  CHECK(sig.words != run_signature(plans, scratch).words);  // the undropped run has more links
  CHECK(std::all_of(scratch.flows_on_link.begin(), scratch.flows_on_link.end(),
                    [](std::uint32_t n) { return n == 0; }));
}

TEST_CASE("renumbering the flows of a busy network is refused") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  PricingScratch scratch(topo);
  scratch.net.transfer(FlowLinks{{0, 1.0}}, 1e6, [] {});
  CHECK_THROWS_AS(scratch.net.renumber_flows(), std::logic_error);
  scratch.sim.run();
  CHECK_NOTHROW(scratch.net.renumber_flows());
}
