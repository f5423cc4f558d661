#include "network/flow_network.hpp"

#include <doctest/doctest.h>

#include "network/flow_links_helper.hpp"
#include "network/link_usage.hpp"

using namespace meshsim;
namespace test = meshsim::test;

namespace {
// gpu_a ══ NVLink 100 GB/s/dir ══ gpu_b ── NVLink 100 ── gpu_c
// Payload capacity = 100 × 0.8 (NVLink efficiency) = 80 GB/s per direction.
struct Line {
  Topology topo;
  Line() {
    const auto a = topo.add_vertex(Vertex{VertexKind::gpu, "a", 0, 0, -1});
    const auto b = topo.add_vertex(Vertex{VertexKind::gpu, "b", 0, 1, -1});
    const auto c = topo.add_vertex(Vertex{VertexKind::gpu, "c", 0, 2, -1});
    topo.add_link(a, b, LinkKind::nvlink, 100e9, Time::zero());  // edges 0 (a→b), 1 (b→a)
    topo.add_link(b, c, LinkKind::nvlink, 100e9, Time::zero());  // edges 2 (b→c), 3 (c→b)
  }
};
}  // namespace

TEST_CASE("one flow takes bytes / payload capacity") {
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  CHECK(net.capacity_Bps(0) == doctest::Approx(80e9));
  Time end;
  net.transfer(test::on_links({0}), 8e9, [&] { end = sim.now(); });  // 8 GB / 80 GB/s = 100 ms
  sim.run();
  CHECK(end == Time::ms(100));
  CHECK(net.active_flows() == 0);
}

TEST_CASE("two flows share, and the survivor speeds up when one ends") {
  // A: 4 GB, B: 8 GB, both on a→b. Shared: 40 GB/s each; A ends at 4/40 = 100 ms with B at
  // 4 GB left; alone B runs at 80 GB/s: 4/80 = 50 ms more, ending at 150 ms.
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  Time a_end, b_end;
  net.transfer(test::on_links({0}), 4e9, [&] { a_end = sim.now(); });
  net.transfer(test::on_links({0}), 8e9, [&] { b_end = sim.now(); });
  net.settle();
  CHECK(net.rates_on_link(0) == std::vector<double>{40e9, 40e9});
  sim.run();
  CHECK(a_end == Time::ms(100));
  CHECK(b_end == Time::ms(150));
}

TEST_CASE("opposite directions of a link do not share") {
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  Time ab, ba;
  net.transfer(test::on_links({0}), 8e9, [&] { ab = sim.now(); });
  net.transfer(test::on_links({1}), 8e9, [&] { ba = sim.now(); });
  sim.run();
  CHECK(ab == Time::ms(100));
  CHECK(ba == Time::ms(100));
}

TEST_CASE("a flow started later re-rates only its connected set") {
  // X on a→b; Y on b→c (disjoint): starting Y re-solves Y alone. Z on a→b and b→c joins both.
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  net.transfer(test::on_links({0}), 8e9, [] {});
  net.settle();
  CHECK(net.stats().flows_resolved == 1);
  net.transfer(test::on_links({2}), 8e9, [] {});
  net.settle();
  CHECK(net.stats().flows_resolved == 2);  // + Y only
  net.transfer(test::on_links({0, 2}), 8e9, [] {});
  net.settle();
  CHECK(net.stats().flows_resolved == 5);  // + X, Y, Z
  // Z shares each link with one flow: everyone gets 40 GB/s.
  CHECK(net.rates_on_link(0) == std::vector<double>{40e9, 40e9});
  sim.run();
  CHECK(sim.now() == Time::ms(200));  // all three at 40 GB/s: 8/40 = 200 ms
}

TEST_CASE("a flow starting mid-way slows an existing one from then on") {
  // A: 8 GB alone at 80 GB/s for 50 ms (4 GB done), then B (2 GB) joins: both at 40 GB/s;
  // B ends 2/40 = 50 ms later at 100 ms, A has 4 - 2 = 2 GB left at 80: +25 ms → 125 ms.
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  Time a_end, b_end;
  net.transfer(test::on_links({0}), 8e9, [&] { a_end = sim.now(); });
  sim.schedule_at(Time::ms(50),
                  [&] { net.transfer(test::on_links({0}), 2e9, [&] { b_end = sim.now(); }); });
  sim.run();
  CHECK(b_end == Time::ms(100));
  CHECK(a_end == Time::ms(125));
}

TEST_CASE("zero bytes or no links complete at once") {
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  int done = 0;
  net.transfer(test::on_links({0}), 0.0, [&] { ++done; });
  net.transfer(FlowLinks{}, 5.0, [&] { ++done; });
  sim.run();
  CHECK(done == 2);
  CHECK(sim.now() == Time::zero());
}

TEST_CASE("usage of striped paths merges and weighs by fraction") {
  std::vector<Path> paths{{{0, 2}, 0.5, Time::zero()}, {{0, 3}, 0.5, Time::zero()}};
  const auto u = usage_of(paths);
  REQUIRE(u.size() == 3);
  CHECK(u[0].link == 0);
  CHECK(u[0].weight == doctest::Approx(1.0));
  CHECK(u[1].weight == doctest::Approx(0.5));
}

TEST_CASE("bytes carried per link are counted by weight") {
  // A flow of 8 GB over a→b (weight 1) and b→c (weight 0.5): 8 GB and 4 GB.
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  net.transfer(FlowLinks{{0, 1.0}, {2, 0.5}}, 8e9, [] {});
  sim.run();
  CHECK(net.stats().bytes_on_link[0] == doctest::Approx(8e9));
  CHECK(net.stats().bytes_on_link[2] == doctest::Approx(4e9));
  CHECK(net.stats().bytes_on_link[1] == 0.0);
  // Rate: link 2 allows 80/0.5 = 160 GB/s, link 0 80 GB/s: 8/80 = 100 ms.
  CHECK(sim.now() == Time::ms(100));
}

TEST_CASE("changes at one instant are re-solved once, with the rates of solving after each") {
  // Three flows started at t = 0 by three separate calls share a→b: one solve of the three, each
  // at 80/3 GB/s; a fourth started by the first one's completion joins the survivors in one solve.
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  Time a_end, b_end, c_end, d_end;
  net.transfer(test::on_links({0}), 4e9, [&] {
    a_end = sim.now();
    net.transfer(test::on_links({0}), 4e9, [&] { d_end = sim.now(); });
  });
  net.transfer(test::on_links({0}), 8e9, [&] { b_end = sim.now(); });
  net.transfer(test::on_links({0}), 8e9, [&] { c_end = sim.now(); });
  CHECK(net.stats().resolves == 0);  // nothing solved before the instant ends
  sim.run();
  // 0..150 ms: three at 80/3 GB/s, a's 4 GB done. Then b, c (4 GB left each) and d (4 GB) at
  // 80/3 GB/s: all end 150 ms later.
  CHECK(a_end == Time::ms(150));
  CHECK(b_end == Time::ms(300));
  CHECK(c_end == Time::ms(300));
  CHECK(d_end == Time::ms(300));
  // One solve at t = 0, one at 150 ms (a's end and d's start together), one at 300 ms.
  CHECK(net.stats().resolves == 3);
}

TEST_CASE("a GPU's HBM scale paces the flows at that GPU from the moment it changes") {
  // F1: 8 GB a→b and F2: 8 GB c→b, each alone on its link (80 GB/s). Both touch b; F1 also
  // touches a, and is paced by the more throttled of its two GPUs.
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  net.enable_gpu_rate_scales(l.topo);
  const auto a = *l.topo.find("a"), b = *l.topo.find("b");
  Time f1, f2;
  net.transfer(test::on_links({0}), 8e9, [&] { f1 = sim.now(); });
  net.transfer(test::on_links({3}), 8e9, [&] { f2 = sim.now(); });
  // 0–50 ms at 80 GB/s: 4 GB each done. 50–100 ms: b at ½ → 40 GB/s, 2 GB each done; a at ¼
  // from 50 ms too → F1 (touches a and b) at 20 GB/s: 1 GB done. 100 ms: b back to 1, a stays ¼:
  // F1 at 20 GB/s with 3 GB left → 150 ms more, ends at 250 ms; F2 at 80 GB/s with 2 GB left →
  // 25 ms more, ends at 125 ms.
  sim.schedule_at(Time::ms(50), [&] {
    net.set_gpu_rate_scale(a, 0.25);
    net.set_gpu_rate_scale(b, 0.5);
  });
  sim.schedule_at(Time::ms(100), [&] { net.set_gpu_rate_scale(b, 1.0); });
  sim.run();
  CHECK(f2 == Time::ms(125));
  CHECK(f1 == Time::ms(250));
  CHECK(net.active_flows() == 0);
}

TEST_CASE("GPU HBM scales: a flow started while a GPU is throttled starts slowed") {
  // b at ½ from the start: an 8 GB flow a→b runs at 40 GB/s (200 ms); a flow b→a started after
  // b recovers runs at the full 80 GB/s (100 ms).
  Line l;
  Simulator sim;
  FlowNetwork net(l.topo, sim);
  net.enable_gpu_rate_scales(l.topo);
  net.set_gpu_rate_scale(*l.topo.find("b"), 0.5);
  Time f1;
  net.transfer(test::on_links({0}), 8e9, [&] { f1 = sim.now(); });
  sim.run();
  CHECK(f1 == Time::ms(200));
  net.set_gpu_rate_scale(*l.topo.find("b"), 1.0);
  Time f2;
  const Time start = sim.now();
  net.transfer(test::on_links({1}), 8e9, [&] { f2 = sim.now(); });
  sim.run();
  CHECK(f2 - start == Time::ms(100));
  // Without enabling, setting a scale is a programming error, not a silent no-op.
  FlowNetwork plain(l.topo, sim);
  CHECK_THROWS_AS(plain.set_gpu_rate_scale(*l.topo.find("a"), 0.5), std::logic_error);
}
