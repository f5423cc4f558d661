// Network model performance (issue 3 targets):
//  - price one 512-rank all_reduce on the 64-node H100 superpod: <= 10 ms cold, <= 10 us cached;
//  - 10,000 concurrent flows on the 16,384-GPU cluster: full max-min solve <= 100 ms; one flow's
//    end with incremental re-solve <= 1 ms.
#include <benchmark/benchmark.h>

#include "core/rng.hpp"
#include "network/collective_runner.hpp"
#include "network/link_efficiency.hpp"
#include "network/link_usage.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;

namespace {
std::string path(const char* name) {
  return std::string(MESHSIM_SOURCE_DIR) + "/topologies/" + name;
}

const Topology& superpod() {
  static const Topology t = load_topology(path("dgx-h100-superpod.json"));
  return t;
}
const Topology& cluster16k() {
  static const Topology t = load_topology(path("h100-16k.json"));
  return t;
}
CollectiveCall all_reduce_512() {
  CollectiveCall c{CollectiveOp::all_reduce, {}, 1024.0 * (1 << 20)};
  for (std::int32_t i = 0; i < 512; ++i) c.ranks.push_back(i);
  return c;
}

// A realistic mix on the 16K cluster: TP rings inside nodes (NVLink), DP rings across nodes on
// the rails, and random cross-pod pairs, 10,000 flows in all.
std::vector<FlowLinks> mixed_flows(Router& router) {
  std::vector<FlowLinks> flows;
  Rng rng(42);
  for (std::int32_t node = 0; flows.size() < 6000; ++node)
    for (std::int32_t g = 0; g < 8; ++g)
      flows.push_back(usage_of(router.gpu_route(node * 8 + g, node * 8 + (g + 1) % 8).paths));
  for (std::int32_t i = 0; flows.size() < 9000; ++i)
    flows.push_back(usage_of(
        router.gpu_route(i * 8 % 16384 + (i / 2048) % 8, (i * 8 + 8) % 16384 + (i / 2048) % 8)
            .paths));
  while (flows.size() < 10000)
    flows.push_back(usage_of(router
                                 .gpu_route(static_cast<std::int32_t>(rng.below(16384)),
                                            static_cast<std::int32_t>(rng.below(16384)))
                                 .paths));
  return flows;
}
}  // namespace

static void BM_Price512AllReduceCold(benchmark::State& state) {
  const auto& t = superpod();
  const auto call = all_reduce_512();
  for (auto _ : state) {
    Router router(t);  // cold routes too
    CollectiveCostCache cache;
    benchmark::DoNotOptimize(price_collective(t, router, call, std::nullopt, &cache).time);
  }
}
BENCHMARK(BM_Price512AllReduceCold)->Unit(benchmark::kMillisecond);

static void BM_Price512AllReduceRingCold(benchmark::State& state) {
  const auto& t = superpod();
  const auto call = all_reduce_512();
  for (auto _ : state) {
    Router router(t);
    benchmark::DoNotOptimize(price_collective(t, router, call, CollectiveAlgo::ring).time);
  }
}
BENCHMARK(BM_Price512AllReduceRingCold)->Unit(benchmark::kMillisecond);

// Cold price, warm routes: a simulation keeps one Router, so a new message size for a group it
// has seen costs the planning and the flow simulation, not the routing.
static void BM_Price512AllReduceWarmRoutes(benchmark::State& state) {
  const auto& t = superpod();
  auto call = all_reduce_512();
  Router router(t);
  price_collective(t, router, call, std::nullopt);
  for (auto _ : state) {
    call.bytes *= 1.0001;  // a size never priced before
    benchmark::DoNotOptimize(price_collective(t, router, call, std::nullopt).time);
  }
}
BENCHMARK(BM_Price512AllReduceWarmRoutes)->Unit(benchmark::kMillisecond);

static void BM_Price512AllReduceCached(benchmark::State& state) {
  const auto& t = superpod();
  const auto call = all_reduce_512();
  Router router(t);
  CollectiveCostCache cache;
  price_collective(t, router, call, std::nullopt, &cache);
  for (auto _ : state)
    benchmark::DoNotOptimize(price_collective(t, router, call, std::nullopt, &cache).time);
}
BENCHMARK(BM_Price512AllReduceCached)->Unit(benchmark::kMicrosecond);

static void BM_FullSolve10kFlows16k(benchmark::State& state) {
  const auto& t = cluster16k();
  Router router(t);
  FairShareInput in;
  for (std::uint32_t l = 0; l < t.directed_edge_count(); ++l)
    in.capacity.push_back(t.link(l).bandwidth_Bps * payload_efficiency(t.link(l).kind));
  in.flows = mixed_flows(router);
  for (auto _ : state) benchmark::DoNotOptimize(solve_max_min(in));
  state.counters["flows"] = static_cast<double>(in.flows.size());
}
BENCHMARK(BM_FullSolve10kFlows16k)->Unit(benchmark::kMillisecond);

// One flow ends among 10,000 active ones; the network re-solves only the connected set.
static void BM_IncrementalEnd10kFlows16k(benchmark::State& state) {
  const auto& t = cluster16k();
  Router router(t);
  const auto flows = mixed_flows(router);
  Simulator sim;
  FlowNetwork net(t, sim);
  // The 6,000 TP flows (NVLink only; each its own connected set) are long; the 4,000 flows that
  // cross the fabric carry 1, 2, 3, ... MB so they end one at a time, each end re-rating the
  // fabric flows connected to it.
  std::vector<FlowNetwork::FlowRequest> batch;
  for (std::size_t i = 0; i < flows.size(); ++i)
    batch.push_back({flows[i], i < 6000 ? 1e15 : 1e6 * static_cast<double>(i - 5999), [] {}});
  net.transfer_batch(std::move(batch));
  std::uint64_t ends = 0, resolved_before = net.stats().flows_resolved;
  for (auto _ : state) {
    if (!sim.step()) state.SkipWithError("ran out of flows");
    ++ends;
  }
  state.counters["flows_resolved_per_end"] =
      static_cast<double>(net.stats().flows_resolved - resolved_before) / static_cast<double>(ends);
}
BENCHMARK(BM_IncrementalEnd10kFlows16k)->Iterations(2000)->Unit(benchmark::kMicrosecond);
