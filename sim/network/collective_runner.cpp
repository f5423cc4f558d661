#include "network/collective_runner.hpp"

#include <memory>

#include "core/error.hpp"

namespace meshsim {
namespace {

struct Execution {
  FlowNetwork& net;
  const CollectivePlan& plan;
  std::function<void()> done;
  std::size_t phase = 0;
  std::size_t pending = 0;
};

void start_phase(const std::shared_ptr<Execution>& ex) {
  if (ex->phase == ex->plan.phases.size()) {
    ex->done();
    return;
  }
  const auto& flows = ex->plan.phases[ex->phase];
  if (flows.empty()) {
    ++ex->phase;
    start_phase(ex);
    return;
  }
  ex->pending = flows.size();
  std::vector<FlowNetwork::FlowRequest> batch;
  batch.reserve(flows.size());
  for (const auto& f : flows)
    batch.push_back(FlowNetwork::FlowRequest{f.links, f.bytes, [ex] {
                                               if (--ex->pending == 0) {
                                                 ++ex->phase;
                                                 start_phase(ex);
                                               }
                                             }});
  ex->net.transfer_batch(std::move(batch));
}

}  // namespace

void run_collective(FlowNetwork& net, Simulator& sim, const CollectivePlan& plan,
                    std::function<void()> done) {
  auto ex = std::make_shared<Execution>(Execution{net, plan, std::move(done)});
  sim.schedule_after(plan.latency, [ex] { start_phase(ex); });
}

Time time_alone(const Topology& topo, const CollectivePlan& plan) {
  Simulator sim;
  FlowNetwork net(topo, sim);
  Time end = Time::max();
  run_collective(net, sim, plan, [&] { end = sim.now(); });
  sim.run();
  if (end == Time::max()) throw std::logic_error("collective did not finish");
  return end;
}

std::optional<Time> CollectiveCostCache::find(const Key& k) const {
  auto it = map_.find(k);
  if (it == map_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

void CollectiveCostCache::insert(Key k, Time t) { map_.emplace(std::move(k), t); }

PricedCollective price_collective(const Topology& topo, Router& router, const CollectiveCall& call,
                                  std::optional<CollectiveAlgo> algo, CollectiveCostCache* cache) {
  std::optional<PricedCollective> best;
  std::string why;
  for (auto a : kAllCollectiveAlgos) {
    if (algo && a != *algo) continue;
    for (auto proto : kAllProtocols) {
      CollectiveCostCache::Key key{call.op, a, proto, call.ranks, call.bytes, 0};
      std::optional<Time> t = cache ? cache->find(key) : std::nullopt;
      if (!t) {
        std::string reason;
        const auto plan = plan_collective(topo, router, call, a, proto, &reason);
        if (!plan) {
          if (why.empty()) why = reason;
          continue;
        }
        t = time_alone(topo, *plan);
        if (cache) cache->insert(key, *t);
      }
      // Ties go to the earlier (algorithm, protocol) in enumeration order: deterministic.
      if (!best || *t < best->time) best = PricedCollective{a, proto, *t};
    }
  }
  if (!best)
    throw Error("", "--algo", std::string(algo ? name_of(*algo) : "auto") + " cannot run " +
                                  std::string(name_of(call.op)) + " here: " + why);
  return *best;
}

}  // namespace meshsim
