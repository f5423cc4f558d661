#include "strategy/comm_model.hpp"

#include <doctest/doctest.h>

#include "network/collective_plan.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {

CommRequest request(GroupKind kind, CollectiveOp op, std::vector<std::int32_t> ranks,
                    double bytes) {
  CommRequest r;
  r.kind = kind;
  r.call = {op, std::move(ranks), bytes};
  r.algo = CollectiveAlgo::ring;
  return r;
}

}  // namespace

TEST_CASE("folded link sharing: the same ring twice halves its flow rate; disjoint links none") {
  // Two nodes, tp=8 (a TP group is a node), pp=2 (stage 1 on the second node).
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), {.nodes = 2});
  const Placement placement(parse_mesh("tp=8,pp=2", "--mesh"));
  CommContext ctx(topo);
  FoldedComm comm(topo, placement, ctx);
  OpGraph g;
  const auto tp = g.add_stream(0, StreamKind::tp);
  const auto pp = g.add_stream(0, StreamKind::pp);
  const auto ag =
      request(GroupKind::tp, CollectiveOp::all_gather, {0, 1, 2, 3, 4, 5, 6, 7}, 64.0 * (1 << 20));
  auto send = request(GroupKind::pp, CollectiveOp::send_recv, {0, 8}, 16.0 * (1 << 20));
  send.algo.reset();
  const auto a = comm.collective_of(comm.add(g, tp, "ag", ag, {}));
  const auto s = comm.collective_of(comm.add(g, pp, "send", send, {}));
  REQUIRE(a >= 0);
  REQUIRE(s >= 0);
  CHECK(a != s);

  // Hand value: both rings cross the same links with the same weights, so max-min gives each
  // half of every link and the flow phase takes twice as long; the α term (the plan's latency)
  // is not slowed: rate = (α + F) / (α + 2F), F = price − α.
  const auto priced = price_collective(topo, ctx.router, ag.call, ag.algo);
  const auto plan = plan_collective(topo, ctx.router, ag.call, priced.algo, priced.protocol);
  REQUIRE(plan);
  const double alpha = plan->latency.seconds();
  const double total = comm.price(ag).seconds();
  const double flows = total - alpha;
  REQUIRE(flows > 0);
  CHECK(comm.share(a, {a}) == doctest::Approx(total / (alpha + 2 * flows)).epsilon(1e-6));

  // NVLink (the TP ring) and the PCIe/NIC/InfiniBand path of the send share no link.
  CHECK(comm.share(a, {s}) == 1.0);
  CHECK(comm.share(s, {a}) == 1.0);
  // With the send beside it too, the ring still only feels its twin.
  CHECK(comm.share(a, {s, a}) == doctest::Approx(comm.share(a, {a})).epsilon(1e-12));
  // A collective of no bytes has no price and no key.
  auto empty = ag;
  empty.call.bytes = 0;
  CHECK(comm.collective_of(comm.add(g, tp, "empty", empty, {})) == -1);
}

TEST_CASE("folded prices: copies planned from the links cache price to the bit as planned anew") {
  // Eight nodes, dp=16 × tp=4: each DP group (two GPUs per node: two ring channels) has three
  // copies. The second price of a group at another size takes its copies' links from the cache;
  // a fresh context plans them with their flows.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), {.nodes = 8});
  const Placement placement(parse_mesh("tp=4,dp=16", "--mesh"));
  std::vector<std::int32_t> dp;
  for (std::int32_t r = 0; r < 64; r += 4) dp.push_back(r);
  for (const auto op : {CollectiveOp::reduce_scatter, CollectiveOp::all_reduce}) {
    INFO(name_of(op));
    const auto first = request(GroupKind::dp, op, dp, 512.0 * (1 << 20));
    const auto second = request(GroupKind::dp, op, dp, 384.0 * (1 << 20));
    CommContext shared(topo);
    FoldedComm warm(topo, placement, shared);
    const Time first_s = warm.price(first);
    const auto cached = shared.folded.plan_links.size();
    CHECK(cached == 4);  // the group and its three copies
    const Time second_s = warm.price(second);
    CHECK(shared.folded.plan_links.size() == cached);  // nothing planned anew
    CommContext fresh(topo);
    FoldedComm cold(topo, placement, fresh);
    CHECK(cold.price(second) == second_s);
    CHECK(second_s < first_s);
  }
}

TEST_CASE("folded prices: the unloaded bound is the lone plan at its narrowest link, never above") {
  // Two nodes, tp=8 × pp=2: stage 0's send to stage 1 goes GPU → PCIe switch → NIC → leaf → NIC
  // → PCIe switch → GPU. Its narrowest link is PCIe Gen5 x16: 64 GB/s × 0.75 payload = 48 GB/s
  // (InfiniBand NDR: 50 GB/s × 64/66 = 48.5). Hand value: 16 MiB × wire factor / 48 GB/s after
  // the plan's latency. Each pipeline's send is on its own rail, so the copies share no link
  // and the price is that flow alone: the bound is tight (to its rounding margin).
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), {.nodes = 2});
  const Placement placement(parse_mesh("tp=8,pp=2", "--mesh"));
  CommContext ctx(topo);
  FoldedComm comm(topo, placement, ctx);
  auto send = request(GroupKind::pp, CollectiveOp::send_recv, {0, 8}, 16.0 * (1 << 20));
  send.algo.reset();
  const auto priced = price_collective(topo, ctx.router, send.call, send.algo);
  const auto plan = plan_collective(topo, ctx.router, send.call, priced.algo, priced.protocol);
  REQUIRE(plan);
  const Time unloaded = comm.unloaded_price(send);
  const double flow_s = (unloaded - plan->latency).seconds();
  CHECK(flow_s == doctest::Approx(16.0 * (1 << 20) * plan->wire_factor / 48e9).epsilon(1e-7));
  const Time price = comm.price(send);
  CHECK(unloaded <= price);
  CHECK(unloaded.seconds() == doctest::Approx(price.seconds()).epsilon(1e-7));

  // Eight nodes, dp=16 × tp=4: each data-parallel ring shares the rails with its three copies,
  // so its price is above the bound, which holds for every collective and size.
  const auto big = load_topology(topology_path("dgx-h100-superpod.json"), {.nodes = 8});
  const Placement dp_placement(parse_mesh("tp=4,dp=16", "--mesh"));
  CommContext dp_ctx(big);
  FoldedComm dp_comm(big, dp_placement, dp_ctx);
  std::vector<std::int32_t> dp;
  for (std::int32_t r = 0; r < 64; r += 4) dp.push_back(r);
  for (const auto op :
       {CollectiveOp::reduce_scatter, CollectiveOp::all_gather, CollectiveOp::all_reduce}) {
    for (const double mib : {1.0, 64.0, 512.0}) {
      INFO(name_of(op) << " " << mib << " MiB");
      auto r = request(GroupKind::dp, op, dp, mib * (1 << 20));
      r.algo.reset();
      const Time bound = dp_comm.unloaded_price(r);
      const Time p = dp_comm.price(r);
      CHECK(bound > Time::zero());
      CHECK(bound <= p);
    }
  }
  // A calibration profile's measured fit may price a collective below the model: no bound for
  // that collective (16 ranks on 8 nodes), the bound as before for the others.
  LinkCalibration calibration;
  CollectiveCalibration fit;
  fit.op = CollectiveOp::all_reduce;
  fit.ranks = 16;
  fit.nodes = 8;
  fit.regimes.push_back(AlphaBetaRegime{});
  calibration.collectives.push_back(fit);
  auto gather = request(GroupKind::dp, CollectiveOp::all_gather, dp, 3e6);
  gather.algo.reset();
  const Time uncalibrated = dp_comm.unloaded_price(gather);
  CommContext cal_ctx(big);
  cal_ctx.calibration = &calibration;
  FoldedComm cal_comm(big, dp_placement, cal_ctx);
  CHECK(cal_comm.unloaded_price(request(GroupKind::dp, CollectiveOp::all_reduce, dp, 3e6)) ==
        Time::zero());
  CHECK(cal_comm.unloaded_price(gather) == uncalibrated);
  CHECK(uncalibrated > Time::zero());
}

TEST_CASE("folded prices: a price found in the shared table is the price a fresh context makes") {
  // Two contexts of one search share their prices and plan links: the second takes the first's,
  // which is what a context of its own would have priced, to the bit.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), {.nodes = 8});
  const Placement placement(parse_mesh("tp=4,dp=16", "--mesh"));
  std::vector<std::int32_t> dp;
  for (std::int32_t r = 0; r < 64; r += 4) dp.push_back(r);
  const auto r = request(GroupKind::dp, CollectiveOp::all_reduce, dp, 256.0 * (1 << 20));
  const auto table = std::make_shared<SharedPrices>();
  CommContext a(topo, table), b(topo, table), alone(topo);
  FoldedComm first(topo, placement, a), second(topo, placement, b), own(topo, placement, alone);
  const Time p = first.price(r);
  CHECK(b.scratch.net.stats().flows_started == 0);
  CHECK(second.price(r) == p);
  CHECK(b.scratch.net.stats().flows_started == 0);  // nothing simulated: the table's price
  CHECK(own.price(r) == p);
  CHECK(alone.scratch.net.stats().flows_started > 0);
  // At another size the second context prices anew, with the links the first one planned: the
  // same price as its own planning gives, with fewer routes worked out.
  auto other = r;
  other.call.bytes = 96.0 * (1 << 20);
  const Time q = second.price(other);
  CHECK(b.scratch.net.stats().flows_started > 0);
  CHECK(own.price(other) == q);
  CHECK(b.router.cached_routes() < alone.router.cached_routes());  // 70 against 256
}

TEST_CASE("folded prices: the same group at another pipeline stage is simulated once") {
  // Eight nodes, tp=8 × dp=4 × pp=2: stage 0's data-parallel groups lie on nodes 0-3, stage 1's
  // on nodes 4-7, wired alike. Pricing stage 1's reduce-scatter after stage 0's finds its run by
  // signature (nothing simulated) at the price a fresh context simulates for it, to the bit.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), {.nodes = 8});
  const Placement placement(parse_mesh("tp=8,dp=4,pp=2", "--mesh"));
  std::vector<std::int32_t> stage0, stage1;
  for (const auto& g : placement.all_groups(GroupKind::dp)) {
    if (placement.coord_of(g.front()).pp == 0 && stage0.empty()) stage0 = g;
    if (placement.coord_of(g.front()).pp == 1 && stage1.empty()) stage1 = g;
  }
  REQUIRE(stage0.size() == 4);
  REQUIRE(stage1.size() == 4);
  CHECK(stage0 != stage1);
  const auto r0 = request(GroupKind::dp, CollectiveOp::reduce_scatter, stage0, 512.0 * (1 << 20));
  const auto r1 = request(GroupKind::dp, CollectiveOp::reduce_scatter, stage1, 512.0 * (1 << 20));
  CommContext ctx(topo), alone(topo);
  FoldedComm comm(topo, placement, ctx), own(topo, placement, alone);
  const Time p0 = comm.price(r0);
  const auto flows = ctx.scratch.net.stats().flows_started;
  CHECK(ctx.runs->size() == 1);
  const Time p1 = comm.price(r1);
  CHECK(ctx.runs->size() == 1);
  // Only the representative alone was simulated (to choose the algorithm), not its copies.
  CHECK(ctx.scratch.net.stats().flows_started - flows <= 8);
  CHECK(own.price(r1) == p1);
  CHECK(p1 == p0);
  // Another size is another run.
  auto smaller = r1;
  smaller.call.bytes /= 2;
  CHECK(comm.price(smaller) < p1);
  CHECK(ctx.runs->size() == 2);
}
