#include "engine/replay.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/rng.hpp"

using namespace meshsim;

namespace {
struct Recorder : OpHooks {
  std::vector<std::string> events;
  void op_started(const OpGraph& g, OpId id, Time t) override {
    events.push_back("start " + std::string(g.op(id).name) + " @" +
                     std::to_string(t.picoseconds() / 1000));
  }
  void op_finished(const OpGraph& g, OpId id, Time t) override {
    events.push_back("end " + std::string(g.op(id).name) + " @" +
                     std::to_string(t.picoseconds() / 1000));
  }
};
}  // namespace

TEST_CASE_TEMPLATE("a stream runs its ops one at a time, in order", Q, BinaryHeapQueue,
                   QuaternaryHeapQueue) {
  OpGraph g;
  auto s = g.add_stream(0, StreamKind::compute);
  auto a = g.add_op(s, "a", Time::ns(3));
  auto b = g.add_op(s, "b", Time::ns(4));
  BasicSimulator<Q> sim;
  auto r = Replay<BasicSimulator<Q>>(g, sim).run();
  CHECK(r.ops[a.value].start == Time::ns(0));
  CHECK(r.ops[a.value].end == Time::ns(3));
  CHECK(r.ops[b.value].start == Time::ns(3));
  CHECK(r.makespan == Time::ns(7));
}

TEST_CASE("cross-stream dependencies: compute overlaps communication") {
  //  compute: [bwd1 5][bwd2 5]
  //  dp:            [ar1 7 (after bwd1)][ar2 7 (after bwd2 and ar1)]
  // ar1 runs 5..12 alongside bwd2 (5..10); ar2 starts at 12 (stream busy), ends 19.
  // When an op ends, the ops waiting on it start before its own stream's next op.
  OpGraph g;
  auto comp = g.add_stream(0, StreamKind::compute);
  auto dp = g.add_stream(0, StreamKind::dp);
  auto bwd1 = g.add_op(comp, "bwd1", Time::ns(5));
  auto bwd2 = g.add_op(comp, "bwd2", Time::ns(5));
  auto ar1 = g.add_op(dp, "ar1", Time::ns(7), {bwd1});
  auto ar2 = g.add_op(dp, "ar2", Time::ns(7), {bwd2});
  Simulator sim;
  Recorder rec;
  auto r = Replay<Simulator>(g, sim, &rec).run();
  CHECK(r.ops[ar1.value].start == Time::ns(5));
  CHECK(r.ops[ar2.value].start == Time::ns(12));
  CHECK(r.makespan == Time::ns(19));
  CHECK(rec.events == std::vector<std::string>{"start bwd1 @0", "end bwd1 @5", "start ar1 @5",
                                               "start bwd2 @5", "end bwd2 @10", "end ar1 @12",
                                               "start ar2 @12", "end ar2 @19"});
}

TEST_CASE("an asynchronous op ends when its model says so") {
  OpGraph g;
  Simulator sim;
  auto s = g.add_stream(3, StreamKind::tp);
  auto net = g.add_async_op(s, "all_reduce", [&](OpId, OpDone done) {
    sim.schedule_after(Time::us(2), std::move(done));  // a model deciding the duration
  });
  auto after = g.add_op(s, "next", Time::us(1));
  auto r = Replay<Simulator>(g, sim).run();
  CHECK(r.ops[net.value].end == Time::us(2));
  CHECK(r.ops[after.value].end == Time::us(3));
  CHECK(g.stream(s).label == "rank3.tp");
}

TEST_CASE("an op that never finishes is reported, not hung") {
  // Ids grow with insertion and dependencies point to earlier ids, so insertion order is a
  // topological order that respects every stream: stream order alone cannot deadlock. What can
  // is a model that never completes an asynchronous op; replay must say which op.
  OpGraph g;
  auto t0 = g.add_stream(0, StreamKind::compute);
  g.add_async_op(t0, "never_completes", [](OpId, OpDone) {});
  g.add_op(t0, "behind", Time::ns(1));
  Simulator sim;
  try {
    Replay<Simulator>(g, sim).run();
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "op 'never_completes' on stream 'rank0.compute' never finished");
  }
}

TEST_CASE("dependencies must point to earlier ops") {
  OpGraph g;
  auto s = g.add_stream(0, StreamKind::compute);
  CHECK_THROWS_AS(g.add_op(s, "self", Time::ns(1), {OpId{0}}), std::logic_error);
}

TEST_CASE("interference: a compute op slows while a collective that holds SMs runs beside it") {
  // compute: k, 10 µs of work, slowdown 2 while comm runs; comm: c, 4 µs from t = 0 (holds SMs).
  // 0..4 µs: k at half rate does 2 µs of work; 4..12 µs: the 8 µs left at full rate → ends at 12.
  OpGraph g;
  auto cs = g.add_stream(0, StreamKind::compute);
  auto ts = g.add_stream(0, StreamKind::tp);
  auto other = g.add_stream(1, StreamKind::compute);  // another rank: not slowed
  auto k = g.add_op(cs, "k", Time::us(10));
  auto c = g.add_op(ts, "c", Time::us(4));
  auto o = g.add_op(other, "o", Time::us(10));
  ReplayInterference in;
  in.slowdown = {2.0F, 1.0F, 2.0F};
  in.holds_sms = {false, true, false};
  Simulator sim;
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  CHECK(r.ops[c.value].end == Time::us(4));
  CHECK(r.ops[k.value].end == Time::us(12));
  CHECK(r.ops[o.value].end == Time::us(10));

  // A collective on copy engines (holds no SMs) slows nothing.
  in.holds_sms = {false, false, false};
  Simulator sim2;
  auto r2 = Replay<Simulator>(g, sim2, nullptr, &in).run();
  CHECK(r2.ops[k.value].end == Time::us(10));
}

TEST_CASE("interference: a kernel priced beside its own collective, and another beside it") {
  // k: 10 µs of work priced beside its TP stream (a userbuffers chunk GEMM priced on the SMs its
  // reduce-scatter leaves), slowdown 2 beside another collective. own: 0..12 µs on the TP stream
  // (holds SMs); dp: 2..6 µs on the DP stream (holds SMs), after d (2 µs, no SMs).
  // 0..2: full (2 done); 2..6: half (2 done); then 6 µs at full → ends at 12 µs.
  // Without the mark, own alone slows k from 0: 0..12 at half does 6 µs of work, own ends,
  // then 4 µs at full → 16 µs.
  OpGraph g;
  auto cs = g.add_stream(0, StreamKind::compute);
  auto ts = g.add_stream(0, StreamKind::tp);
  auto ds = g.add_stream(0, StreamKind::dp);
  auto ps = g.add_stream(0, StreamKind::pp);
  auto k = g.add_op(cs, "k", Time::us(10));
  auto own = g.add_op(ts, "own", Time::us(12));
  auto d = g.add_op(ps, "d", Time::us(2));
  auto dp = g.add_op(ds, "dp", Time::us(4), {d});
  ReplayInterference in;
  in.slowdown = {2.0F, 1.0F, 1.0F, 1.0F};
  in.holds_sms = {false, true, false, true};
  in.priced_beside = {static_cast<std::int32_t>(ts.value), -1, -1, -1};
  Simulator sim;
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  CHECK(r.ops[dp.value].start == Time::us(2));
  CHECK(r.ops[own.value].end == Time::us(12));
  CHECK(r.ops[k.value].end == Time::us(12));

  in.priced_beside.clear();
  Simulator sim2;
  auto r2 = Replay<Simulator>(g, sim2, nullptr, &in).run();
  CHECK(r2.ops[k.value].end == Time::us(16));

  // A bulk-overlap GEMM: 1.25 beside its own collective only, 4 beside both, 2 beside the other
  // only. 0..2 own: 2/1.25 = 1.6 µs done; 2..6 both: 1 (2.6); 6..12 own: 4.8 (7.4); the 2.6 µs
  // left at full → 14.6 µs.
  in.priced_beside = {static_cast<std::int32_t>(ts.value), -1, -1, -1};
  in.own_slowdown = {1.25F, 1.0F, 1.0F, 1.0F};
  in.both_slowdown = {4.0F, 0.0F, 0.0F, 0.0F};
  Simulator sim4;
  auto r4 = Replay<Simulator>(g, sim4, nullptr, &in).run();
  CHECK(r4.ops[k.value].end.seconds() == doctest::Approx(14.6e-6).epsilon(1e-9).scale(0));
  in.own_slowdown.clear();
  in.both_slowdown.clear();

  // The other collective on copy engines (no SMs): only the marked stream is busy, and k runs
  // at full rate.
  in.holds_sms = {false, true, false, false};
  Simulator sim3;
  auto r3 = Replay<Simulator>(g, sim3, nullptr, &in).run();
  CHECK(r3.ops[k.value].end == Time::us(10));
}

TEST_CASE("interference: a collective starting mid-kernel slows only the overlapped part") {
  // k: 10 µs; c waits for d (3 µs on another comm stream of the same rank, holding no SMs) and
  // runs 3..5 µs holding SMs; slowdown 1.5: 0..3 full (3 done), 3..5 at 2/3 (4/3 done),
  // then 10 − 3 − 4/3 = 17/3 µs at full → ends at 5 + 17/3 = 32/3 µs.
  OpGraph g;
  auto cs = g.add_stream(0, StreamKind::compute);
  auto ps = g.add_stream(0, StreamKind::pp);
  auto ts = g.add_stream(0, StreamKind::tp);
  auto k = g.add_op(cs, "k", Time::us(10));
  auto d = g.add_op(ps, "d", Time::us(3));
  auto c = g.add_op(ts, "c", Time::us(2), {d});
  ReplayInterference in;
  in.slowdown = {1.5F, 1.0F, 1.0F};
  in.holds_sms = {false, false, true};
  Simulator sim;
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  CHECK(r.ops[c.value].start == Time::us(3));
  CHECK(r.ops[k.value].end.seconds() == doctest::Approx(32.0 / 3.0 * 1e-6).epsilon(1e-6).scale(0));
}

namespace {

// A kernel m on rank 0's compute stream streaming HBM for `f` of its time, beside a collective c
// on a comm stream holding no SMs and demanding `d` of the achievable HBM bandwidth.
struct KernelBesideCollective {
  OpGraph g;
  OpId m, c;
  ReplayInterference in;
  KernelBesideCollective(Time m_time, Time c_time, float f, float d) {
    m = g.add_op(g.add_stream(0, StreamKind::compute), "m", m_time);
    c = g.add_op(g.add_stream(0, StreamKind::dp), "c", c_time);
    in.hbm_fraction = {f, 0.0F};
    in.hbm_demand = {0.0F, d};
  }
  ReplayResult run() {
    Simulator sim;
    return Replay<Simulator>(g, sim, nullptr, &in).run();
  }
};

}  // namespace

TEST_CASE("HBM sharing: a memory-bound kernel and a collective each get their share") {
  // m: 10 µs, streaming HBM for 80 % of its time (f = 0.8); c: 5 µs on a comm stream, holding
  // no SMs, demanding 0.4 of the achievable bandwidth. Together D = 0.8 + 0.4 = 1.2 > 1, so each
  // gets 1/1.2 of what it asks: m's traffic stretches, rate 1 / (1 + 0.8 · 0.2) = 1/1.16; the
  // collective (all HBM traffic) runs at 1/1.2 and ends at 6 µs. m: 6/1.16 µs done by then, the
  // rest at full rate → ends at 16 − 6/1.16 µs. c lost 6 · (1 − 1/1.2) = 1 µs to HBM sharing.
  KernelBesideCollective k(Time::us(10), Time::us(5), 0.8F, 0.4F);
  const auto m = k.m, c = k.c;
  auto r = k.run();
  const double f = static_cast<double>(0.8F), d = static_cast<double>(0.4F);
  const double rate = 1.0 / (1.0 + f * (f + d - 1.0));
  CHECK(r.ops[c.value].end.seconds() ==
        doctest::Approx(5.0 * (f + d) * 1e-6).epsilon(1e-6).scale(0));
  CHECK(r.ops[m.value].end.seconds() ==
        doctest::Approx((10.0 + 5.0 * (f + d) * (1.0 - rate)) * 1e-6).epsilon(1e-6).scale(0));
  REQUIRE(r.hbm_wait_ps.size() == 2);
  CHECK(r.hbm_wait_ps[m.value] == 0.0F);  // kernels' losses are interference_s, not this
  CHECK(static_cast<double>(r.hbm_wait_ps[c.value]) ==
        doctest::Approx(5.0 * (f + d) * (1.0 - 1.0 / (f + d)) * 1e6).epsilon(1e-5));

  // Demands that fit in the bandwidth together slow nothing: a GEMM streaming 20 % of its time.
  k.in.hbm_fraction = {0.2F, 0.0F};
  auto r2 = k.run();
  CHECK(r2.ops[m.value].end == Time::us(10));
  CHECK(r2.ops[c.value].end == Time::us(5));
  CHECK(r2.hbm_wait_ps[c.value] == 0.0F);

  // Two collectives add their demands: D = 0.8 + 0.4 + 0.4 = 1.6 → m at 1 / (1 + 0.8 · 0.6),
  // each collective at 1/1.6, both ending at 8 µs; m ends at 18 − 8 · rate3 µs.
  OpGraph g3;
  auto cs3 = g3.add_stream(0, StreamKind::compute);
  auto a3 = g3.add_stream(0, StreamKind::dp);
  auto b3 = g3.add_stream(0, StreamKind::tp);
  auto m3 = g3.add_op(cs3, "m", Time::us(10));
  auto c31 = g3.add_op(a3, "c1", Time::us(5));
  auto c32 = g3.add_op(b3, "c2", Time::us(5));
  ReplayInterference in3;
  in3.hbm_fraction = {0.8F, 0.0F, 0.0F};
  in3.hbm_demand = {0.0F, 0.4F, 0.4F};
  Simulator sim3;
  auto r3 = Replay<Simulator>(g3, sim3, nullptr, &in3).run();
  const double d3 = f + 2 * d;
  const double rate3 = 1.0 / (1.0 + f * (d3 - 1.0));
  CHECK(r3.ops[c31.value].end.seconds() == doctest::Approx(5.0 * d3 * 1e-6).epsilon(1e-6).scale(0));
  CHECK(r3.ops[c32.value].end.seconds() == doctest::Approx(5.0 * d3 * 1e-6).epsilon(1e-6).scale(0));
  CHECK(r3.ops[m3.value].end.seconds() ==
        doctest::Approx((10.0 + 5.0 * d3 * (1.0 - rate3)) * 1e-6).epsilon(1e-6).scale(0));
}

TEST_CASE("HBM sharing: a collective speeds up again when the kernel beside it ends") {
  // m: 2 µs of work at f = 0.8, c: 5 µs at demand 0.4; D = 1.2 while both run. m at 1/1.16
  // ends at 2.32 µs; c has done 2.32/1.2 µs by then and runs the rest at full rate → ends at
  // 5 + 2.32 · (1 − 1/1.2) µs, having lost 2.32 · (1 − 1/1.2) µs to HBM sharing.
  KernelBesideCollective k(Time::us(2), Time::us(5), 0.8F, 0.4F);
  const auto m = k.m, c = k.c;
  auto r = k.run();
  const double f = static_cast<double>(0.8F), d = static_cast<double>(0.4F);
  const double m_end_us = 2.0 * (1.0 + f * (f + d - 1.0));
  const double lost_us = m_end_us * (1.0 - 1.0 / (f + d));
  CHECK(r.ops[m.value].end.seconds() == doctest::Approx(m_end_us * 1e-6).epsilon(1e-6).scale(0));
  CHECK(r.ops[c.value].end.seconds() ==
        doctest::Approx((5.0 + lost_us) * 1e-6).epsilon(1e-6).scale(0));
  CHECK(static_cast<double>(r.hbm_wait_ps[c.value]) ==
        doctest::Approx(lost_us * 1e6).epsilon(1e-5));
}

TEST_CASE("HBM sharing: an asynchronous collective hears its rank's demand and is charged") {
  // A collective priced by a network model (asynchronous: it ends when the model says, here
  // after 5 µs) beside m (f = 0.8, 10 µs): the replay tells the model each change of the rank's D
  // (it scales its flows, network/flow_network.hpp) and charges the op 5 · (1 − 1/1.2) µs.
  OpGraph g;
  auto cs = g.add_stream(3, StreamKind::compute);
  auto ts = g.add_stream(3, StreamKind::dp);
  Simulator sim;
  auto m = g.add_op(cs, "m", Time::us(10));
  auto c = g.add_async_op(
      ts, "c", [&sim](OpId, OpDone done) { sim.schedule_after(Time::us(5), std::move(done)); });
  ReplayInterference in;
  in.hbm_fraction = {0.8F, 0.0F};
  in.hbm_demand = {0.0F, 0.4F};
  std::vector<std::pair<std::int32_t, double>> heard;
  in.on_hbm = [&](std::int32_t rank, double d) { heard.emplace_back(rank, d); };
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  const double f = static_cast<double>(0.8F), d = static_cast<double>(0.4F);
  CHECK(r.ops[c.value].end == Time::us(5));  // the network model decides
  REQUIRE(heard.size() == 4);
  CHECK(heard[0].first == 3);
  CHECK(heard[0].second == doctest::Approx(f));      // m starts
  CHECK(heard[1].second == doctest::Approx(f + d));  // c starts
  CHECK(heard[2].second == doctest::Approx(f));      // c ends
  CHECK(heard[3].second == 0.0);                     // m ends
  CHECK(static_cast<double>(r.hbm_wait_ps[c.value]) ==
        doctest::Approx(5.0 * (1.0 - 1.0 / (f + d)) * 1e6).epsilon(1e-5));
  // m's traffic was squeezed while c ran: 5/1.16 µs done by 5 µs, the rest alone.
  CHECK(r.ops[m.value].end.seconds() ==
        doctest::Approx((15.0 - 5.0 / (1.0 + f * (f + d - 1.0))) * 1e-6).epsilon(1e-6).scale(0));
}

TEST_CASE("HBM and link sharing multiply") {
  // a and b (4 µs each, keys 0 and 1) share links at ½ and each demands 0.25 of HBM beside a
  // kernel m streaming HBM for f = 1 of its 20 µs: D = 1 + 0.5 = 1.5, so each collective runs at
  // ½ · 1/1.5 = 1/3 and both end at 12 µs. Their HBM loss: 12 · (1 − 1/1.5) = 4 µs each.
  OpGraph g;
  auto cs = g.add_stream(0, StreamKind::compute);
  auto dp = g.add_stream(0, StreamKind::dp);
  auto tp = g.add_stream(0, StreamKind::tp);
  g.add_op(cs, "m", Time::us(20));
  auto a = g.add_op(dp, "a", Time::us(4));
  auto b = g.add_op(tp, "b", Time::us(4));
  ReplayInterference in;
  in.hbm_fraction = {1.0F, 0.0F, 0.0F};
  in.hbm_demand = {0.0F, 0.25F, 0.25F};
  in.share_key = {-1, 0, 1};
  in.share = [](std::int32_t, std::vector<std::int32_t>) { return 0.5; };
  Simulator sim;
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  CHECK(r.ops[a.value].end.seconds() == doctest::Approx(12e-6).epsilon(1e-6).scale(0));
  CHECK(r.ops[b.value].end.seconds() == doctest::Approx(12e-6).epsilon(1e-6).scale(0));
  CHECK(static_cast<double>(r.hbm_wait_ps[a.value]) == doctest::Approx(4e6).epsilon(1e-5));
}

TEST_CASE("link sharing: overlapping collectives run at the rate the model gives each") {
  // a (10 µs, key 0) and b (4 µs, key 1) start together on two comm streams of rank 0 and each
  // runs at ½ while the other does: b ends at 8 µs (4 done), a has 4 of 10 done then and runs
  // the last 6 alone → 14 µs. c on rank 1 is alone and keeps its 10 µs.
  OpGraph g;
  auto dp = g.add_stream(0, StreamKind::dp);
  auto tp = g.add_stream(0, StreamKind::tp);
  auto other = g.add_stream(1, StreamKind::dp);
  auto a = g.add_op(dp, "a", Time::us(10));
  auto b = g.add_op(tp, "b", Time::us(4));
  auto c = g.add_op(other, "c", Time::us(10));
  ReplayInterference in;
  in.share_key = {0, 1, 0};
  std::vector<std::vector<std::int32_t>> asked;
  in.share = [&](std::int32_t self, std::vector<std::int32_t> others) {
    others.insert(others.begin(), self);
    asked.push_back(others);
    return 0.5;
  };
  Simulator sim;
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  CHECK(r.ops[b.value].end == Time::us(8));
  CHECK(r.ops[a.value].end == Time::us(14));
  CHECK(r.ops[c.value].end == Time::us(10));
  // Only ops of one rank are asked about each other, with the other's key.
  for (const auto& q : asked) {
    REQUIRE(q.size() == 2);
    CHECK(q[0] != q[1]);
  }

  // Three at once on one rank: the rate the model gives for the pair of others applies.
  OpGraph g3;
  std::vector<OpId> ops;
  for (auto k : {StreamKind::dp, StreamKind::tp, StreamKind::pp})
    ops.push_back(g3.add_op(g3.add_stream(0, k), "x", Time::us(6)));
  ReplayInterference in3;
  in3.share_key = {0, 1, 2};
  in3.share = [](std::int32_t, std::vector<std::int32_t> others) {
    return others.size() == 2 ? 1.0 / 3.0 : 0.5;
  };
  Simulator sim3;
  auto r3 = Replay<Simulator>(g3, sim3, nullptr, &in3).run();
  for (auto id : ops) CHECK(r3.ops[id.value].end == Time::us(18));
}

TEST_CASE("late start: a collective ready mid-kernel waits for that kernel's SMs") {
  // k: 10 µs on the compute stream, then k2: 4 µs. c (2 µs, holds SMs) waits for d (3 µs on
  // another comm stream, holding no SMs): ready at 3 µs while k, begun at 0, holds every SM, so
  // it starts when k ends, at 10 µs, before k2 (slowdown 2 beside it): k2 runs 10..12 at half
  // rate (1 µs done) and 12..15 at full → 15 µs. c waited 7 µs.
  OpGraph g;
  auto cs = g.add_stream(0, StreamKind::compute);
  auto ps = g.add_stream(0, StreamKind::pp);
  auto ts = g.add_stream(0, StreamKind::tp);
  auto k = g.add_op(cs, "k", Time::us(10));
  auto k2 = g.add_op(cs, "k2", Time::us(4));
  auto d = g.add_op(ps, "d", Time::us(3));
  auto c = g.add_op(ts, "c", Time::us(2), {d});
  ReplayInterference in;
  in.slowdown = {1.0F, 2.0F, 1.0F, 1.0F};
  in.holds_sms = {false, false, false, true};
  in.late_start = true;
  Simulator sim;
  Recorder rec;
  auto r = Replay<Simulator>(g, sim, &rec, &in).run();
  CHECK(r.ops[c.value].start == Time::us(10));
  CHECK(r.ops[c.value].end == Time::us(12));
  CHECK(r.ops[k2.value].start == Time::us(10));
  CHECK(r.ops[k2.value].end == Time::us(15));
  REQUIRE(r.sm_wait_ps.size() == 4);
  CHECK(r.sm_wait_ps[c.value] == doctest::Approx(7e6));
  CHECK(r.sm_wait_ps[k.value] == 0.0F);
  // The collective starts before the kernel the compute stream releases next.
  CHECK(rec.events == std::vector<std::string>{"start k @0", "start d @0", "end d @3000",
                                               "end k @10000", "start c @10000", "start k2 @10000",
                                               "end c @12000", "end k2 @15000"});

  // A collective on copy engines (holds no SMs) starts when it is ready.
  in.holds_sms = {false, false, false, false};
  Simulator sim2;
  auto r2 = Replay<Simulator>(g, sim2, nullptr, &in).run();
  CHECK(r2.ops[c.value].start == Time::us(3));
  CHECK(r2.sm_wait_ps[c.value] == 0.0F);

  // A kernel priced beside the collective's stream was planned to leave its SMs: no wait.
  in.holds_sms = {false, false, false, true};
  in.priced_beside = {static_cast<std::int32_t>(ts.value), -1, -1, -1};
  Simulator sim3;
  auto r3 = Replay<Simulator>(g, sim3, nullptr, &in).run();
  CHECK(r3.ops[c.value].start == Time::us(3));

  // Without late start (the `ideal` stack has no interference at all) it starts at 3 µs.
  in.priced_beside.clear();
  in.late_start = false;
  Simulator sim4;
  auto r4 = Replay<Simulator>(g, sim4, nullptr, &in).run();
  CHECK(r4.ops[c.value].start == Time::us(3));
  CHECK(r4.sm_wait_ps.empty());
}

TEST_CASE("late start: a kernel that starts with the collective does not hold it back") {
  // The traces issue a collective before the kernels it overlaps: c (1 µs) depends on k1 and
  // starts with k2 when k1 ends, at 5 µs, without waiting. c2 (1 µs, after c) is ready at 6 µs
  // while k2, begun at 5, holds the SMs: it waits for k2's end.
  // k2 (8 µs, slowdown 1.5 beside an SM-holding collective): 5..6 beside c at 2/3 rate (2/3
  // done), then alone: 8 − 2/3 = 22/3 µs → ends at 6 + 22/3 = 40/3 µs; c2 runs 40/3..43/3.
  OpGraph g;
  auto cs = g.add_stream(0, StreamKind::compute);
  auto ts = g.add_stream(0, StreamKind::tp);
  auto ds = g.add_stream(0, StreamKind::dp);
  auto k1 = g.add_op(cs, "k1", Time::us(5));
  auto k2 = g.add_op(cs, "k2", Time::us(8));
  auto c = g.add_op(ts, "c", Time::us(1), {k1});
  auto c2 = g.add_op(ds, "c2", Time::us(1), {c});
  ReplayInterference in;
  in.slowdown = {1.0F, 1.5F, 1.0F, 1.0F};
  in.holds_sms = {false, false, true, true};
  in.late_start = true;
  Simulator sim;
  auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
  CHECK(r.ops[c.value].start == Time::us(5));
  CHECK(r.sm_wait_ps[c.value] == 0.0F);
  CHECK(r.ops[k2.value].end.seconds() == doctest::Approx(40.0 / 3.0 * 1e-6).epsilon(1e-6).scale(0));
  CHECK(r.ops[c2.value].start == r.ops[k2.value].end);
  CHECK(r.sm_wait_ps[c2.value] == doctest::Approx((40.0 / 3.0 - 6.0) * 1e6).epsilon(1e-5));
}

TEST_CASE("late start: random graphs keep every rule, with interference, HBM and link sharing") {
  // Seeded random graphs on two ranks (a compute stream and three communication streams each),
  // random durations, dependencies on earlier ops of any stream and rank, SM-holding or copy-
  // engine collectives, slowdowns, HBM fractions and demands, link sharing and a kernel priced
  // beside a stream. Whatever the mix, the replay must finish every op in stream order after its
  // dependencies, never start an SM-holding collective while a kernel of its rank that began
  // before it runs (unless priced beside the collective's stream), and charge each collective
  // exactly the time between its being ready and its start.
  const StreamKind comm_kinds[] = {StreamKind::tp, StreamKind::dp, StreamKind::pp};
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    Rng rng(seed);
    OpGraph g;
    std::vector<StreamId> streams;
    for (std::int32_t rank = 0; rank < 2; ++rank) {
      streams.push_back(g.add_stream(rank, StreamKind::compute));
      for (const auto k : comm_kinds) streams.push_back(g.add_stream(rank, k));
    }
    const std::size_t n = 10 + rng.below(40);
    ReplayInterference in;
    in.late_start = true;
    std::vector<OpId> ops;
    for (std::size_t i = 0; i < n; ++i) {
      const StreamId s = streams[rng.below(streams.size())];
      const bool compute = g.stream(s).kind == StreamKind::compute;
      std::vector<OpId> deps;
      for (std::uint64_t d = rng.below(3); d > 0 && !ops.empty(); --d)
        deps.push_back(ops[rng.below(ops.size())]);
      std::sort(deps.begin(), deps.end(), [](OpId a, OpId b) { return a.value < b.value; });
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      ops.push_back(
          g.add_op(s, "op", Time::ns(static_cast<std::int64_t>(1 + rng.below(1000))), deps));
      in.slowdown.push_back(compute ? static_cast<float>(1.0 + rng.uniform01()) : 1.0F);
      in.holds_sms.push_back(!compute && rng.below(4) != 0);
      // A kernel priced beside its rank's TP stream now and then.
      in.priced_beside.push_back(
          compute && rng.below(5) == 0 ? static_cast<std::int32_t>(s.value + 1) : -1);
      in.hbm_fraction.push_back(compute ? static_cast<float>(0.5 * rng.uniform01()) : 0.0F);
      in.hbm_demand.push_back(compute ? 0.0F : static_cast<float>(0.6 * rng.uniform01()));
      in.share_key.push_back(compute ? -1 : static_cast<std::int32_t>(rng.below(3)));
    }
    in.share = [](std::int32_t self, const std::vector<std::int32_t>& others) {
      return std::count(others.begin(), others.end(), self) > 0 ? 0.5 : 1.0;
    };
    Simulator sim;
    const auto r = Replay<Simulator>(g, sim, nullptr, &in).run();
    INFO("seed " << seed);
    REQUIRE(r.sm_wait_ps.size() == n);
    std::vector<Time> previous_end(g.stream_count(), Time::zero());
    for (std::size_t i = 0; i < n; ++i) {
      const Op op = g.op(ops[i]);
      const auto& t = r.ops[i];
      REQUIRE(t.finished());
      // Ready: its dependencies and the op before it on its stream have ended.
      Time ready = previous_end[op.stream.value];
      for (const auto d : op.deps) ready = std::max(ready, r.ops[d.value].end);
      CHECK(t.start >= ready);
      previous_end[op.stream.value] = t.end;
      const auto& st = g.stream(op.stream);
      if (st.kind == StreamKind::compute || !in.holds_sms[i]) {
        CHECK(t.start == ready);  // only SM-holding collectives wait
        CHECK(r.sm_wait_ps[i] == 0.0F);
        continue;
      }
      CHECK(r.sm_wait_ps[i] ==
            doctest::Approx(static_cast<double>((t.start - ready).picoseconds())));
      // It waits exactly when, once ready, a kernel that holds its SMs had begun before it.
      bool blocked_when_ready = false;
      for (std::size_t j = 0; j < n; ++j) {
        const Op k = g.op(ops[j]);
        if (g.stream(k.stream).kind != StreamKind::compute || g.stream(k.stream).rank != st.rank ||
            in.priced_beside[j] == static_cast<std::int32_t>(op.stream.value))
          continue;
        CHECK_FALSE((r.ops[j].start < t.start && t.start < r.ops[j].end));
        blocked_when_ready |= r.ops[j].start < ready && ready < r.ops[j].end;
      }
      CHECK((t.start > ready) == blocked_when_ready);
    }
  }
}
