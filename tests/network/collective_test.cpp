#include <doctest/doctest.h>

#include "network/collective_runner.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {
std::vector<std::int32_t> iota_ranks(std::int32_t n, std::int32_t first = 0,
                                     std::int32_t step = 1) {
  std::vector<std::int32_t> r;
  for (std::int32_t i = 0; i < n; ++i) r.push_back(first + i * step);
  return r;
}
constexpr double kGiB8 = 8589934592.0;
}  // namespace

TEST_CASE("nccl-tests busbw factors") {
  CHECK(busbw_factor(CollectiveOp::all_reduce, 8) == doctest::Approx(1.75));
  CHECK(busbw_factor(CollectiveOp::all_gather, 8) == doctest::Approx(0.875));
  CHECK(busbw_factor(CollectiveOp::reduce_scatter, 4) == doctest::Approx(0.75));
  CHECK(busbw_factor(CollectiveOp::all_to_all, 2) == doctest::Approx(0.5));
  CHECK(busbw_factor(CollectiveOp::broadcast, 8) == 1.0);
  CHECK(busbw_factor(CollectiveOp::send_recv, 2) == 1.0);
  CHECK(busbw_factor(CollectiveOp::all_reduce, 1) == 0.0);
}

TEST_CASE("ring all-reduce on one DGX H100, by hand") {
  // Latency (NCCL Simple): base 8.4 µs + 2(n-1) = 14 NVLink steps × 3.4 µs = 56 µs.
  // Bytes: each ring edge carries 2(n-1)/n·S = 1.75·S. A GPU's 4 NVSwitch up-links carry a quarter
  // of its one outgoing edge each, at 112.5 GB/s × 0.8 payload = 90 GB/s: the ring runs at 360
  // GB/s. t = 56 µs + 1.75 × 8 GiB / 360e9 = 56 µs + 41.7566 ms.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  Router router(topo);
  const CollectiveCall call{CollectiveOp::all_reduce, iota_ranks(8), kGiB8};
  const auto plan = plan_collective(topo, router, call, CollectiveAlgo::ring, Protocol::simple);
  REQUIRE(plan);
  CHECK(plan->latency == Time::us(56));
  const double expected_s = 56e-6 + 1.75 * kGiB8 / 360e9;
  CHECK(time_alone(topo, *plan).seconds() == doctest::Approx(expected_s).epsilon(1e-9));
}

TEST_CASE("NVLS all-reduce on one DGX H100, by hand") {
  // Each GPU sends (1 + 1/n)·S = 1.125·S up to the switches and receives as much; NVLS runs at
  // 0.85 of the payload rate (NCCL's Hopper NVLS efficiency). Per up-link: 1.125/4 of the flow
  // at 90 GB/s → 320 GB/s of S; wire bytes S/0.85. Latency 8.4 + 2 × 25 µs = 58.4 µs.
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  Router router(topo);
  const CollectiveCall call{CollectiveOp::all_reduce, iota_ranks(8), kGiB8};
  const auto plan = plan_collective(topo, router, call, CollectiveAlgo::nvls, Protocol::simple);
  REQUIRE(plan);
  const double expected_s = 58.4e-6 + kGiB8 / 0.85 / 320e9;
  const double t = time_alone(topo, *plan).seconds();
  CHECK(t == doctest::Approx(expected_s).epsilon(1e-9));
  // busbw = S/t × 1.75 ≈ 475 GB/s, the published ≈ 480 GB/s (validation/collectives.md B2/B3).
  CHECK(kGiB8 / t * 1.75 == doctest::Approx(475.1e9).epsilon(0.001));
}

TEST_CASE("GB200: a ring of the two GPUs under one Grace runs on NVLink, and NVLS is offered") {
  // Latency: 8.4 µs + 2 NVLink steps × 3.4 µs = 15.2 µs. Each GPU's one ring edge (S bytes)
  // spreads over its 18 NVLink5 planes at 50 GB/s × 0.8 payload: 720 GB/s. It went through the
  // Grace's C2C (225 GB/s) before GPU pairs preferred NVLink (topology/router.hpp).
  const auto topo = load_topology(topology_path("gb200-nvl72.json"), {.nodes = 1});
  Router router(topo);
  const auto ring = plan_collective(topo, router, {CollectiveOp::all_reduce, iota_ranks(2), kGiB8},
                                    CollectiveAlgo::ring, Protocol::simple);
  REQUIRE(ring);
  CHECK(ring->latency == Time::ns(15200));
  CHECK(time_alone(topo, *ring).seconds() ==
        doctest::Approx(15.2e-6 + kGiB8 / 720e9).epsilon(1e-9));
  // Every pair of the rack crosses an NVLink switch, so NVLS (Blackwell, NVSwitch) can run.
  std::string why;
  CHECK(plan_collective(topo, router, {CollectiveOp::all_reduce, iota_ranks(8), kGiB8},
                        CollectiveAlgo::nvls, Protocol::simple, &why));
  CHECK(why.empty());
}

TEST_CASE("h100-16k: a ring across pods runs at the rails' rate, a part-filled pod included") {
  // Every ring edge between nodes is one NIC's 400 Gb/s whether it stays in a pod or crosses
  // the cores (1:1 at every tier), so 264 nodes (a pod and one unit of the next) take about as
  // long as 256 (one pod): only the 8 more nodes' latency steps and bytes differ. Before flows
  // took fabric paths by list position and the part-filled pod's spines had 6.25 GB/s core
  // links, it took 18 times as long.
  const auto time_on = [](std::int32_t nodes) {
    const auto topo = load_topology(topology_path("h100-16k.json"), {.nodes = nodes});
    Router router(topo);
    const auto plan =
        plan_collective(topo, router, {CollectiveOp::all_reduce, iota_ranks(nodes * 8), kGiB8},
                        CollectiveAlgo::ring, Protocol::simple);
    REQUIRE(plan);
    return time_alone(topo, *plan).seconds();
  };
  const double one_pod = time_on(256), more = time_on(264);
  CHECK(more > one_pod);
  CHECK(more < 1.05 * one_pod);
}

TEST_CASE("auto choice: latency-bound small messages, bandwidth-optimal large ones") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  Router router(topo);
  CollectiveCostCache cache;
  auto pick = [&](double bytes) {
    return price_collective(topo, router, {CollectiveOp::all_reduce, iota_ranks(8), bytes},
                            std::nullopt, &cache);
  };
  const auto small = pick(1 << 20), large = pick(kGiB8);
  CHECK(small.algo == CollectiveAlgo::ring);
  CHECK(small.protocol == Protocol::ll);
  CHECK(large.algo == CollectiveAlgo::nvls);
  // Pricing again is a lookup.
  const auto hits = cache.hits();
  CHECK(pick(kGiB8).time == large.time);
  CHECK(cache.hits() > hits);
  // A100 has no NVLS: forcing it is an error naming why.
  const auto a100 = load_topology(topology_path("dgx-a100.json"));
  Router r2(a100);
  CHECK_THROWS_WITH_AS(price_collective(a100, r2, {CollectiveOp::all_reduce, iota_ranks(8), 1e6},
                                        CollectiveAlgo::nvls),
                       "--algo: nvls cannot run all_reduce here: NVLS needs NVSwitch and a "
                       "Hopper-or-later GPU",
                       Error);
}

TEST_CASE("one-rank groups and zero bytes finish in the launch latency") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  Router router(topo);
  const auto one =
      price_collective(topo, router, {CollectiveOp::all_reduce, {3}, 1e9}, std::nullopt);
  CHECK(one.time == Time::from_seconds_ceil(6.6e-6));  // LL base latency: nothing to move
  const auto zero =
      price_collective(topo, router, {CollectiveOp::all_gather, iota_ranks(8), 0.0}, std::nullopt);
  CHECK(zero.time < Time::us(20));
}

TEST_CASE("multi-node ring stays on the rails: 2 DGX H100, 16 ranks") {
  // 8 channels, each leaving every node on its own rail (PXN). Per channel and direction a NIC
  // carries 1/8 of 2(n-1)/n·S; the ring's pace is set by NVLink, where the PXN hop adds a
  // second NVLink transfer for one GPU per channel. busbw must stay near 8 NICs × 48.5 GB/s
  // payload and never exceed it; published per-NIC busbw is 46-48 GB/s (collectives.md B4).
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{2});
  Router router(topo);
  const CollectiveCall call{CollectiveOp::all_reduce, iota_ranks(16), kGiB8};
  const auto priced = price_collective(topo, router, call, CollectiveAlgo::ring);
  const double busbw = kGiB8 / priced.time.seconds() * busbw_factor(call.op, 16);
  CHECK(busbw / 8 > 44e9);
  CHECK(busbw / 8 <= 50e9 * 64 / 66);
}

TEST_CASE("contention: DP reduce-scatters on the rails do not slow TP all-reduces on NVLink") {
  // 64 DGX H100. TP groups: the 8 GPUs of each node (NVLink only). DP groups: GPU r of every node
  // (rail r: PCIe → NIC → leaf, never NVLink). They share no link, so TP takes exactly as long
  // with the DP traffic as without it.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"));
  Router router(topo);
  const double tp_bytes = 256.0 * (1 << 20), dp_bytes = 1024.0 * (1 << 20);
  std::vector<CollectivePlan> tp, dp;
  for (std::int32_t node = 0; node < 64; ++node)
    tp.push_back(*plan_collective(topo, router,
                                  {CollectiveOp::all_reduce, iota_ranks(8, node * 8), tp_bytes},
                                  CollectiveAlgo::ring, Protocol::simple));
  for (std::int32_t rail = 0; rail < 8; ++rail)
    dp.push_back(*plan_collective(topo, router,
                                  {CollectiveOp::reduce_scatter, iota_ranks(64, rail, 8), dp_bytes},
                                  CollectiveAlgo::ring, Protocol::simple));
  const Time tp_alone = time_alone(topo, tp.front());
  Simulator sim;
  FlowNetwork net(topo, sim);
  std::vector<Time> tp_end(tp.size());
  Time dp_end;
  for (std::size_t i = 0; i < tp.size(); ++i)
    run_collective(net, sim, tp[i], [&, i] { tp_end[i] = sim.now(); });
  for (auto& p : dp) run_collective(net, sim, p, [&] { dp_end = sim.now(); });
  sim.run();
  for (auto t : tp_end) CHECK(t == tp_alone);
  CHECK(dp_end > tp_alone);  // the DP traffic was really running meanwhile
}

TEST_CASE("contention: two groups forced onto one 2:1 oversubscribed spine") {
  // Two nodes, each: 2 GPUs, each GPU with its own PCIe switch (64 GB/s) and NIC (400 Gb/s).
  // Top-of-rack leaves with 2 down-ports (one node per leaf), 2:1 oversubscribed: each leaf has
  // 2 × 50 / 2 = 50 GB/s up to the single spine.
  //
  //   n0/gpu0─pcie─nic0─┐            ┌─nic0─pcie─n1/gpu0
  //                     leaf0══spine══leaf1
  //   n0/gpu1─pcie─nic1─┘  50 GB/s   └─nic1─pcie─n1/gpu1
  //
  // Payload capacities: PCIe 64 × 0.75 = 48; IB 50 × 64/66 = 48.48. Alone, a send n0/gpu0 →
  // n1/gpu0 runs at min(48, 48.48) = 48 GB/s. With the second group (n0/gpu1 → n1/gpu1) both
  // cross leaf0 → spine (48.48): 24.24 GB/s each. Slowdown 48 / 24.24 = 1.98.
  const Json doc = Json::parse(R"({
    "name": "spine-test", "nodes": 2,
    "node": {"gpu": "H100-SXM5-80GB",
      "vertices": [{"name": "gpu", "kind": "gpu", "count": 2}, {"name": "sw", "kind": "nvswitch"},
                   {"name": "pcie", "kind": "pcie_switch", "count": 2}, {"name": "nic", "kind": "nic", "count": 2}],
      "links": [{"a": "gpu", "b": "sw", "kind": "nvlink", "bandwidth_GBps": 450, "latency_ns": 100},
                {"a": "gpu", "b": "pcie", "kind": "pcie", "bandwidth_GBps": 64, "latency_ns": 250},
                {"a": "nic", "b": "pcie", "kind": "pcie", "bandwidth_GBps": 64, "latency_ns": 250}]},
    "fabric": {"kind": "fat_tree", "rail_optimized": false, "leaf_down_ports": 2, "spines": 1,
               "oversubscription": 2,
               "link": {"kind": "infiniband", "bandwidth_Gbps": 400, "latency_ns": 500}}})");
  const auto topo = load_topology_json(doc, "spine-test.json");
  Router router(topo);
  const double S = 1e9;
  auto plan = [&](std::int32_t a, std::int32_t b) {
    return *plan_collective(topo, router, {CollectiveOp::send_recv, {a, b}, S},
                            CollectiveAlgo::direct, Protocol::simple);
  };
  // One direction only, so the two groups meet on the same spine up-link.
  auto one_way = [](CollectivePlan p) {
    p.phases.front().pop_back();  // keep a→b, drop b→a
    return p;
  };
  const auto g0 = one_way(plan(0, 2)), g1 = one_way(plan(1, 3));
  const Time lat = g0.latency;
  const double alone = (time_alone(topo, g0) - lat).seconds();
  CHECK(alone == doctest::Approx(S / 48e9).epsilon(1e-6));
  Simulator sim;
  FlowNetwork net(topo, sim);
  Time e0, e1;
  run_collective(net, sim, g0, [&] { e0 = sim.now(); });
  run_collective(net, sim, g1, [&] { e1 = sim.now(); });
  sim.run();
  const double shared_Bps = 50e9 * 64 / 66 / 2;
  CHECK((e0 - lat).seconds() == doctest::Approx(S / shared_Bps).epsilon(1e-6));
  CHECK((e1 - lat).seconds() == doctest::Approx(S / shared_Bps).epsilon(1e-6));
}

TEST_CASE("every op and algorithm either plans or says why not") {
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{2});
  Router router(topo);
  for (auto op : kAllCollectiveOps)
    for (auto algo : kAllCollectiveAlgos)
      for (auto proto : kAllProtocols) {
        std::string why;
        const auto plan =
            plan_collective(topo, router, {op, iota_ranks(16), 1e6}, algo, proto, &why);
        CAPTURE(name_of(op));
        CAPTURE(name_of(algo));
        if (plan) {
          CHECK(why.empty());
          CHECK(time_alone(topo, *plan) > Time::zero());
        } else {
          CHECK(!why.empty());
        }
      }
}

TEST_CASE("DeepEP's deduplicated all-to-all on 2 DGX H100, by hand") {
  // 16 ranks, S = 8 GiB per rank, network share 1/2 (a token crosses once to each node it needs,
  // half the copies a plain all-to-all sends there). Each rank sends its rail peer on the other
  // node S·8/16 × 1/2 = S/4 through its own NIC (400 Gb/s at 64/66 payload: 48.48 GB/s), and
  // forwards S/16 × 2 nodes = S/8 to each of its 7 node peers over NVLink (360 GB/s a GPU:
  // 20.9 ms for 7S/8, hidden under the NIC's S/4 / 48.48e9 = 44.3 ms). A plain all-to-all sends
  // S/16 to each of the 8 remote ranks: S/2 through each NIC, twice as long.
  const auto topo = load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{2});
  Router router(topo);
  CollectiveCall call{CollectiveOp::all_to_all, iota_ranks(16), kGiB8};
  const auto plain = price_collective(topo, router, call, std::nullopt);
  CHECK(plain.algo == CollectiveAlgo::direct);
  std::string why;
  CHECK_FALSE(
      plan_collective(topo, router, call, CollectiveAlgo::hierarchical, Protocol::simple, &why));
  CHECK(why == "hierarchical all_to_all is a deduplicating dispatcher's (network share < 1)");

  call.network_share = 0.5;
  const double nic = 50e9 * 64 / 66;
  const auto dedup = price_collective(topo, router, call, std::nullopt);
  CHECK(dedup.algo == CollectiveAlgo::hierarchical);
  CHECK(dedup.time.seconds() == doctest::Approx(kGiB8 / 4 / nic).epsilon(0.01));
  CHECK(plain.time.seconds() == doctest::Approx(kGiB8 / 2 / nic).epsilon(0.02));
  CHECK_FALSE(plan_collective(topo, router, call, CollectiveAlgo::direct, Protocol::simple, &why));
  CHECK(why == "a deduplicating dispatch (network share < 1) runs hierarchical");
  // On one node (DeepEP's intranode kernel), or with different ranks per node (a folded copy of
  // another group's layout), the dispatch is the direct all-to-all of every copy.
  for (const auto& ranks : {iota_ranks(8), std::vector<std::int32_t>{0, 1, 2, 8}}) {
    call.ranks = ranks;
    const auto deduped =
        price_collective(topo, router, call, CollectiveAlgo::hierarchical).time.seconds();
    call.network_share = 1;
    CHECK(deduped == price_collective(topo, router, call, CollectiveAlgo::direct).time.seconds());
    call.network_share = 0.5;
  }
}
