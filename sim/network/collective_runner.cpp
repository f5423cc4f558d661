#include "network/collective_runner.hpp"

#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "core/rng.hpp"

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

void drop_unshared_links(std::vector<CollectivePlan>& plans, PricingScratch& scratch) {
  auto& count = scratch.flows_on_link;
  const auto& net = scratch.net;
  std::vector<std::uint32_t> touched;
  for (const auto& plan : plans)
    for (const auto& phase : plan.phases)
      for (const auto& f : phase)
        for (const auto& u : f.links) {
          if (count.size() <= u.link) count.resize(u.link + 1, 0);
          if (count[u.link]++ == 0) touched.push_back(u.link);
        }
  for (auto& plan : plans)
    for (auto& phase : plan.phases)
      for (auto& f : phase) {
        // The solver's share of an unshared link is capacity / (0 + weight): the same division.
        const auto share = [&](const LinkUse& u) { return net.capacity_Bps(u.link) / u.weight; };
        const LinkUse* least = nullptr;  // least (share, id)
        const LinkUse* first = nullptr;  // first of least share in the list
        std::size_t unshared = 0;
        for (const auto& u : f.links) {
          if (count[u.link] != 1) continue;
          ++unshared;
          const double s = share(u);
          if (!first || s < share(*first)) first = &u;
          if (!least || s < share(*least) || (s == share(*least) && u.link < least->link))
            least = &u;
        }
        if (unshared < 2 || (unshared == 2 && least != first)) continue;
        const auto keep_a = least->link, keep_b = first->link;
        std::erase_if(f.links, [&](const LinkUse& u) {
          return count[u.link] == 1 && u.link != keep_a && u.link != keep_b;
        });
      }
  for (auto l : touched) count[l] = 0;
}

Time time_alone(PricingScratch& scratch, const CollectivePlan& plan) {
  std::vector<CollectivePlan> run{plan};
  drop_unshared_links(run, scratch);
  const Time start = scratch.sim.now();
  Time end = Time::max();
  run_collective(scratch.net, scratch.sim, run.front(), [&] { end = scratch.sim.now(); });
  scratch.sim.run();
  if (end == Time::max()) throw std::logic_error("collective did not finish");
  return end - start;
}

Time time_alone(const Topology& topo, const CollectivePlan& plan) {
  PricingScratch scratch(topo);
  return time_alone(scratch, plan);
}

std::size_t CollectiveCostCache::Hash::operator()(const Key& k) const {
  std::uint64_t h =
      mix64(static_cast<std::uint64_t>(k.op) * 16 + (k.algo ? 1 + static_cast<int>(*k.algo) : 0));
  for (auto r : k.ranks) h = hash_combine(h, static_cast<std::uint64_t>(r));
  std::uint64_t bits;
  std::memcpy(&bits, &k.bytes, sizeof bits);
  return static_cast<std::size_t>(hash_combine(hash_combine(h, bits), k.pattern));
}

const PricedCollective* CollectiveCostCache::find(const Key& k) const {
  auto it = map_.find(k);
  if (it == map_.end()) return nullptr;
  ++hits_;
  return &it->second;
}

void CollectiveCostCache::insert(Key k, PricedCollective p) {
  map_.emplace(std::move(k), p);
}

PricedCollective price_collective(const Topology& topo, Router& router, const CollectiveCall& call,
                                  std::optional<CollectiveAlgo> algo, CollectiveCostCache* cache,
                                  PricingScratch* scratch) {
  CollectiveCostCache::Key key{call.op, algo, call.ranks, call.bytes, 0};
  if (cache)
    if (const auto* hit = cache->find(key)) return *hit;
  std::optional<PricedCollective> best;
  std::string why;
  if (call.ranks.empty()) throw Error("", "--gpus", "empty group");
  const GroupLayout layout = layout_of(topo, router, call.ranks);
  for (auto a : kAllCollectiveAlgos) {
    if (algo && a != *algo) continue;
    // Simulate the algorithm's flows once; every protocol scales all of its flows by the same
    // wire factor, and max-min rates do not depend on bytes, so flow time scales linearly.
    std::optional<Time> flow_time;
    double flow_wire = 1.0;
    for (auto proto : kAllProtocols) {
      std::string reason;
      const auto plan = plan_collective(topo, router, call, layout, a, proto, &reason, !flow_time);
      if (!plan) {
        if (why.empty()) why = reason;
        continue;
      }
      if (!flow_time) {
        flow_time =
            (scratch ? time_alone(*scratch, *plan) : time_alone(topo, *plan)) - plan->latency;
        flow_wire = plan->wire_factor;
      }
      const Time t = plan->latency +
                     Time::from_seconds_ceil(flow_time->seconds() * plan->wire_factor / flow_wire);
      // Ties go to the earlier (algorithm, protocol) in enumeration order: deterministic.
      if (!best || t < best->time) best = PricedCollective{a, proto, t};
    }
  }
  if (!best)
    throw Error("", "--algo",
                std::string(algo ? name_of(*algo) : "auto") + " cannot run " +
                    std::string(name_of(call.op)) + " here: " + why);
  if (cache) cache->insert(std::move(key), *best);
  return *best;
}

}  // namespace meshsim
