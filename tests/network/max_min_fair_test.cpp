#include "network/max_min_fair.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.hpp"
#include "network/flow_links_helper.hpp"

using namespace meshsim;
namespace test = meshsim::test;

TEST_CASE("two flows on one link get half each") {
  // f0, f1 ── link0 (10) ──   Each gets 10/2 = 5.
  const auto r = solve_max_min({{10.0}, {test::on_links({0}), test::on_links({0})}});
  CHECK(r[0] == doctest::Approx(5.0));
  CHECK(r[1] == doctest::Approx(5.0));
}

TEST_CASE("a flow held back by a bottleneck frees capacity for the others") {
  // link0 (10): f0, f1.  link1 (2): f1.
  // Progressive filling: link1's share is 2/1 = 2 < link0's 10/2 = 5, so f1 freezes at 2; f0
  // takes the rest of link0: 10 - 2 = 8.
  const auto r = solve_max_min({{10.0, 2.0}, {test::on_links({0}), test::on_links({0, 1})}});
  CHECK(r[0] == doctest::Approx(8.0));
  CHECK(r[1] == doctest::Approx(2.0));
}

TEST_CASE("parking lot") {
  //   long ────────────────────────►
  //   ──[L0 cap 1]──[L1 cap 1]──[L2 cap 1]──
  //    s0 ──►       s1 ──►       s2 ──►
  // Every link carries the long flow and one short flow: all fair shares are 1/2, so every
  // flow gets 0.5 (max-min; a throughput-maximising allocation would starve the long flow).
  const auto r = solve_max_min(
      {{1.0, 1.0, 1.0},
       {test::on_links({0, 1, 2}), test::on_links({0}), test::on_links({1}), test::on_links({2})}});
  for (double x : r) CHECK(x == doctest::Approx(0.5));
}

TEST_CASE("parking lot with a fatter middle link") {
  // L0 = 1, L1 = 3, L2 = 1. L0 and L2 bind first at 1/2: long, s0 and s2 freeze at 0.5. L1 then
  // has 3 - 0.5 = 2.5 left for s1 alone.
  const auto r = solve_max_min(
      {{1.0, 3.0, 1.0},
       {test::on_links({0, 1, 2}), test::on_links({0}), test::on_links({1}), test::on_links({2})}});
  CHECK(r[0] == doctest::Approx(0.5));
  CHECK(r[1] == doctest::Approx(0.5));
  CHECK(r[2] == doctest::Approx(2.5));
  CHECK(r[3] == doctest::Approx(0.5));
}

TEST_CASE("weights: a ring crossing a link twice counts twice") {
  // f0 uses link0 with weight 2 (two ring edges on it), f1 with weight 1. Equal rates r:
  // 2r + r = 9 → r = 3.
  FairShareInput in{{9.0}, {FlowLinks{{0, 2.0}}, FlowLinks{{0, 1.0}}}};
  const auto r = solve_max_min(in);
  CHECK(r[0] == doctest::Approx(3.0));
  CHECK(r[1] == doctest::Approx(3.0));
}

TEST_CASE("striped flow: a quarter on each of four planes") {
  // One flow striped over 4 links of 10 each (weight 0.25): 0.25 r <= 10 → r = 40.
  FairShareInput in{{10, 10, 10, 10}, {FlowLinks{{0, .25}, {1, .25}, {2, .25}, {3, .25}}}};
  CHECK(solve_max_min(in)[0] == doctest::Approx(40.0));
}

TEST_CASE("a flow that crosses no link is unconstrained") {
  const auto r = solve_max_min({{1.0}, {FlowLinks{}}});
  CHECK(std::isinf(r[0]));
}

TEST_CASE("the scanning and the heap solvers agree on random instances") {
  // 200 random instances: 1-60 flows over 30 links with random capacities and weights. Solved
  // with the scan (threshold above the flow count) and with the heap (threshold 0).
  Rng rng(9);
  for (int instance = 0; instance < 200; ++instance) {
    const std::size_t links = 30;
    std::vector<double> cap(links);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng.below(100));
    std::vector<FlowLinks> flows(1 + rng.below(60));
    for (auto& f : flows) {
      for (std::uint32_t l = 0; l < links; ++l)
        if (rng.below(5) == 0)
          f.push_back(LinkUse{l, 0.25 * static_cast<double>(1 + rng.below(8))});
      if (f.empty()) f.push_back(LinkUse{static_cast<std::uint32_t>(rng.below(links)), 1.0});
    }
    std::vector<std::uint32_t> all(flows.size());
    for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    std::vector<double> scan(flows.size()), heap(flows.size());
    MaxMinSolver(links, 1000).solve(all, flows, cap, scan);
    MaxMinSolver(links, 0).solve(all, flows, cap, heap);
    for (std::size_t i = 0; i < flows.size(); ++i) CHECK(scan[i] == doctest::Approx(heap[i]));
    // Feasible and max-min: no link over capacity, and every flow has a saturated link on which
    // its rate is the largest (the bottleneck condition).
    std::vector<double> load(links, 0.0);
    for (std::size_t i = 0; i < flows.size(); ++i)
      for (const auto& u : flows[i]) load[u.link] += u.weight * heap[i];
    for (std::size_t l = 0; l < links; ++l) CHECK(load[l] <= cap[l] * (1 + 1e-9));
    for (std::size_t i = 0; i < flows.size(); ++i) {
      bool bottleneck = false;
      for (const auto& u : flows[i]) {
        if (load[u.link] < cap[u.link] * (1 - 1e-9)) continue;
        double max_rate = 0;
        for (std::size_t j = 0; j < flows.size(); ++j)
          for (const auto& v : flows[j])
            if (v.link == u.link) max_rate = std::max(max_rate, heap[j]);
        bottleneck = bottleneck || heap[i] >= max_rate * (1 - 1e-9);
      }
      CHECK(bottleneck);
    }
  }
}

TEST_CASE("forty flows on one link (heap path)") {
  FairShareInput in{{40.0}, std::vector<FlowLinks>(40, FlowLinks{{0, 1.0}})};
  for (double r : solve_max_min(in)) CHECK(r == doctest::Approx(1.0));
}

TEST_CASE("a flow listed twice loads its links twice and gets one rate (both solvers)") {
  // Link 0 (capacity 2) carries flow 0 twice and flow 1 once: three shares of 2/3. Link 1
  // (capacity 10) is flow 1's alone. The folded pricing lists a shape's flows twice when a
  // collective overlaps a copy of itself.
  const std::vector<double> cap{2.0, 10.0};
  const std::vector<FlowLinks> flows{{{0, 1.0}}, {{0, 1.0}, {1, 1.0}}};
  const std::vector<std::uint32_t> listed{0, 1, 0};
  for (std::size_t few : {std::size_t{0}, std::size_t{100}}) {
    std::vector<double> rates(2, 0.0);
    MaxMinSolver(cap.size(), few).solve(listed, flows, cap, rates);
    CHECK(rates[0] == doctest::Approx(2.0 / 3));
    CHECK(rates[1] == doctest::Approx(2.0 / 3));
  }
}

TEST_CASE("renaming the links leaves every rate unchanged to the bit (both solvers)") {
  // run_signature prices a plan set by its links' order of first use, not their ids: the solver
  // must break ties without looking at ids. 200 random instances with many ties (capacities of
  // 1-4, weights of 0.5 or 1), solved as given and with the link ids reversed.
  Rng rng(17);
  for (int instance = 0; instance < 200; ++instance) {
    const std::uint32_t links = 24;
    std::vector<double> cap(links);
    for (auto& c : cap) c = static_cast<double>(1 + rng.below(4));
    std::vector<FlowLinks> flows(1 + rng.below(50));
    for (auto& f : flows) {
      for (std::uint32_t l = 0; l < links; ++l)
        if (rng.below(4) == 0) f.push_back(LinkUse{l, rng.below(2) == 0 ? 0.5 : 1.0});
      if (f.empty()) f.push_back(LinkUse{static_cast<std::uint32_t>(rng.below(links)), 1.0});
    }
    auto renamed = flows;
    for (auto& f : renamed)
      for (auto& u : f) u.link = links - 1 - u.link;
    std::vector<double> renamed_cap(cap.rbegin(), cap.rend());
    std::vector<std::uint32_t> all(flows.size());
    for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    for (std::size_t few : {std::size_t{0}, std::size_t{1000}}) {
      CAPTURE(instance);
      CAPTURE(few);
      std::vector<double> a(flows.size()), b(flows.size());
      MaxMinSolver(links, few).solve(all, flows, cap, a);
      MaxMinSolver(links, few).solve(all, renamed, renamed_cap, b);
      CHECK(a == b);
    }
  }
}
