#include <doctest/doctest.h>

#include <cmath>

#include "network/max_min_fair.hpp"

using namespace meshsim;

namespace {
FlowLinks uses(std::initializer_list<std::uint32_t> links) {
  FlowLinks f;
  for (auto l : links) f.push_back(LinkUse{l, 1.0});
  return f;
}
}  // namespace

TEST_CASE("two flows on one link get half each") {
  // f0, f1 ── link0 (10) ──   Each gets 10/2 = 5.
  const auto r = solve_max_min({{10.0}, {uses({0}), uses({0})}});
  CHECK(r[0] == doctest::Approx(5.0));
  CHECK(r[1] == doctest::Approx(5.0));
}

TEST_CASE("a flow held back by a bottleneck frees capacity for the others") {
  // link0 (10): f0, f1.  link1 (2): f1.
  // Progressive filling: link1's share is 2/1 = 2 < link0's 10/2 = 5, so f1 freezes at 2; f0
  // takes the rest of link0: 10 - 2 = 8.
  const auto r = solve_max_min({{10.0, 2.0}, {uses({0}), uses({0, 1})}});
  CHECK(r[0] == doctest::Approx(8.0));
  CHECK(r[1] == doctest::Approx(2.0));
}

TEST_CASE("parking lot") {
  //   long ────────────────────────►
  //   ──[L0 cap 1]──[L1 cap 1]──[L2 cap 1]──
  //    s0 ──►       s1 ──►       s2 ──►
  // Every link carries the long flow and one short flow: all fair shares are 1/2, so every
  // flow gets 0.5 (max-min; a throughput-maximising allocation would starve the long flow).
  const auto r = solve_max_min({{1.0, 1.0, 1.0}, {uses({0, 1, 2}), uses({0}), uses({1}), uses({2})}});
  for (double x : r) CHECK(x == doctest::Approx(0.5));
}

TEST_CASE("parking lot with a fatter middle link") {
  // L0 = 1, L1 = 3, L2 = 1. L0 and L2 bind first at 1/2: long, s0 and s2 freeze at 0.5. L1 then
  // has 3 - 0.5 = 2.5 left for s1 alone.
  const auto r = solve_max_min({{1.0, 3.0, 1.0}, {uses({0, 1, 2}), uses({0}), uses({1}), uses({2})}});
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
