#include "engine/longest_chain.hpp"

#include <doctest/doctest.h>

#include <vector>

#include "engine/replay.hpp"

using namespace meshsim;

namespace {

// A layer pass as the trace builder emits it, by hand:
//   compute: [x 4][q 3 (after ag)][o 5][m 2 (after rs)]
//   tp:         [ag 6 (after x)]      [rs 7 (after o)]
//   dpg: [gather 9] (before the pass: x waits for it)
// Chains from x's start to m's end: x→ag→q→o→rs→m = 4+6+3+5+7+2 = 27; along the compute stream
// alone 4+3+5+2 = 14. The gather precedes x, so it is on no chain.
struct Pass {
  OpGraph g;
  OpId gather, x, ag, q, o, rs, m;
  Pass() {
    const auto c = g.add_stream(0, StreamKind::compute);
    const auto tp = g.add_stream(0, StreamKind::tp);
    const auto dpg = g.add_stream(0, StreamKind::dp_gather);
    gather = g.add_op(dpg, "gather", Time::ns(9));
    x = g.add_op(c, "x", Time::ns(4), {gather});
    ag = g.add_op(tp, "ag", Time::ns(6), {x});
    q = g.add_op(c, "q", Time::ns(3), {ag});
    o = g.add_op(c, "o", Time::ns(5));
    rs = g.add_op(tp, "rs", Time::ns(7), {o});
    m = g.add_op(c, "m", Time::ns(2), {rs});
  }
};

}  // namespace

TEST_CASE("longest chain: through dependencies and stream order, from the first op's start") {
  Pass p;
  CHECK(longest_chain(p.g, p.x, p.m) == Time::ns(27));
  // From the gather: 9 more in front.
  CHECK(longest_chain(p.g, p.gather, p.m) == Time::ns(36));
  // Up to o: x→ag→q→o = 18.
  CHECK(longest_chain(p.g, p.x, p.o) == Time::ns(18));
  // An op that does not follow `from`: zero.
  CHECK(longest_chain(p.g, p.x, p.gather) == Time::zero());
  CHECK(longest_chain(p.g, p.ag, p.x) == Time::zero());
  // The replay of the pass takes at least the chain from x's start: the gather delays x to 9,
  // then 27 more.
  BasicSimulator<BinaryHeapQueue> sim;
  const auto r = Replay<BasicSimulator<BinaryHeapQueue>>(p.g, sim).run();
  CHECK(r.ops[p.m.value].end - r.ops[p.x.value].start == Time::ns(27));
}

TEST_CASE("longest chain: overridden durations, and the ops on a chain") {
  Pass p;
  // Only x..m's chain ops matter; the gather is on none.
  const auto on = chain_ops(p.g, p.x, p.m);
  CHECK(on == std::vector<OpId>{p.x, p.ag, p.q, p.o, p.rs, p.m});
  CHECK(chain_ops(p.g, p.x, p.gather).empty());
  // The collectives priced at 1 ns each (the builder prices what chain_ops returns): 4+1+3+5+1+2.
  std::vector<Time> d(p.g.op_count());
  for (std::uint32_t i = 0; i < d.size(); ++i) d[i] = p.g.op(OpId{i}).duration;
  d[p.ag.value] = d[p.rs.value] = Time::ns(1);
  CHECK(longest_chain(p.g, p.x, p.m, d) == Time::ns(16));
  // A second path that is longer wins: a 20 ns op on another stream between x and m.
  const auto side = p.g.add_stream(0, StreamKind::cp);
  const auto slow = p.g.add_op(side, "slow", Time::ns(20), {p.x});
  const auto c = p.g.op(p.m).stream;
  const auto end = p.g.add_op(c, "end", Time::ns(1), {slow});
  // x(4) → slow(20) → end(1) = 25 against x..m (27) then end (1) = 28.
  CHECK(longest_chain(p.g, p.x, end) == Time::ns(28));
  CHECK(chain_ops(p.g, p.x, end).size() == 8);  // the six, slow and end
}
