#include "network/collective_runner.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>

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
        const LinkUse* first = nullptr;  // first of least share in the list
        std::size_t unshared = 0;
        for (const auto& u : f.links) {
          if (count[u.link] != 1) continue;
          ++unshared;
          if (!first || share(u) < share(*first)) first = &u;
        }
        if (unshared < 2) continue;
        const auto keep = first->link;
        std::erase_if(f.links,
                      [&](const LinkUse& u) { return count[u.link] == 1 && u.link != keep; });
      }
  for (auto l : touched) count[l] = 0;
}

RunSignature run_signature(const std::vector<CollectivePlan>& plans, PricingScratch& scratch) {
  auto& rank = scratch.link_rank;  // 1 + the order in which the plans first name each link
  if (rank.size() < scratch.net.link_count()) rank.assign(scratch.net.link_count(), 0);
  std::vector<std::uint32_t> used;
  for (const auto& plan : plans)
    for (const auto& phase : plan.phases)
      for (const auto& f : phase)
        for (const auto& u : f.links)
          if (rank[u.link] == 0) {
            used.push_back(u.link);
            rank[u.link] = static_cast<std::uint32_t>(used.size());
          }
  RunSignature s;
  auto& w = s.words;
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  w.push_back(plans.size());
  for (const auto& plan : plans) {
    w.push_back(static_cast<std::uint64_t>(plan.latency.picoseconds()));
    w.push_back(plan.phases.size());
    for (const auto& phase : plan.phases) {
      w.push_back(phase.size());
      for (const auto& f : phase) {
        w.push_back(bits(f.bytes));
        w.push_back(f.links.size());
        for (const auto& u : f.links) {
          w.push_back(rank[u.link]);
          w.push_back(bits(u.weight));
        }
      }
    }
  }
  for (auto l : used) {
    w.push_back(bits(scratch.net.capacity_Bps(l)));
    rank[l] = 0;
  }
  // Four independent multiply-xor lanes, mixed at the end: a signature runs to tens of thousands
  // of words, and a chain of full mixes per word cost more than the replay it saves on small runs
  // (the table compares whole signatures, so the hash only has to spread them).
  std::array<std::uint64_t, 4> lane{1, 2, 3, 4};
  for (std::size_t i = 0; i < w.size(); ++i)
    lane[i % 4] = (lane[i % 4] ^ w[i]) * 0x9e3779b97f4a7c15ULL;
  std::uint64_t h = mix64(w.size());
  for (auto x : lane) h = hash_combine(h, mix64(x));
  s.hash = h;
  return s;
}

std::optional<Time> RunTimeCache::find(const RunSignature& s) const {
  std::shared_lock lock(mutex_);
  const auto it = map_.find(s.hash);
  if (it == map_.end()) return std::nullopt;
  for (const auto& [words, t] : it->second)
    if (words == s.words) return t;
  return std::nullopt;
}

void RunTimeCache::insert(const RunSignature& s, Time t) {
  std::unique_lock lock(mutex_);
  if (words_ + s.words.size() > kMaxWords) {
    map_.clear();
    words_ = 0;
  }
  auto& bucket = map_[s.hash];
  for (const auto& entry : bucket)
    if (entry.first == s.words) return;
  bucket.emplace_back(s.words, t);
  words_ += s.words.size();
}

std::size_t RunTimeCache::size() const {
  std::shared_lock lock(mutex_);
  std::size_t n = 0;
  for (const auto& [hash, bucket] : map_) n += bucket.size();
  return n;
}

Time time_alone(PricingScratch& scratch, const CollectivePlan& plan) {
  std::vector<CollectivePlan> run{plan};
  drop_unshared_links(run, scratch);
  scratch.net.renumber_flows();
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
