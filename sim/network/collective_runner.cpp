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

namespace {

// Counts every link use of the n plans plan_of(c) (flow k of phase ph of plan c crosses
// links_of(c, ph, k)) into scratch.flows_on_link; `touched` lists the links counted, to zero
// them after.
template <class PlanOf, class LinksOf>
void count_link_uses(std::size_t n, PlanOf plan_of, LinksOf links_of, PricingScratch& scratch,
                     std::vector<std::uint32_t>& touched) {
  auto& count = scratch.flows_on_link;
  for (std::size_t c = 0; c < n; ++c)
    for (std::size_t ph = 0; ph < plan_of(c).phases.size(); ++ph)
      for (std::size_t k = 0; k < plan_of(c).phases[ph].size(); ++k)
        for (const auto& u : links_of(c, ph, k)) {
          if (count.size() <= u.link) count.resize(u.link + 1, 0);
          if (count[u.link]++ == 0) touched.push_back(u.link);
        }
}

constexpr std::size_t kKeepAll = static_cast<std::size_t>(-1);

// Of the links only this flow crosses (use count 1), the position of the one drop_unshared_links
// keeps: the first of least share in the list; kKeepAll when it has fewer than two.
std::size_t kept_unshared(const FlowLinks& links, const std::vector<std::uint32_t>& count,
                          const FlowNetwork& net) {
  // The solver's share of an unshared link is capacity / (0 + weight): the same division.
  const auto share = [&](const LinkUse& u) { return net.capacity_Bps(u.link) / u.weight; };
  std::size_t first = kKeepAll, unshared = 0;
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (count[links[i].link] != 1) continue;
    ++unshared;
    if (first == kKeepAll || share(links[i]) < share(links[first])) first = i;
  }
  return unshared < 2 ? kKeepAll : first;
}

// The signature of `plans` with each flow's links as drop_unshared_links leaves them (`drop`) or
// as they are, in scratch.signature. The flows' kept links are gathered into one flat buffer
// first, so the renaming and the words walk it in order (the use counts and ranks are looked up
// by link id over arrays of every link of the cluster: random access, once per use).
template <class PlanOf, class LinksOf>
const RunSignature& signature_of(std::size_t n_plans, PlanOf plan_of, LinksOf links_of,
                                 PricingScratch& scratch, bool drop) {
  auto& touched = scratch.touched;
  auto& kept = scratch.kept_links;    // every flow's kept links, flow after flow
  auto& kept_n = scratch.kept_count;  // per flow: how many
  touched.clear();
  kept.clear();
  kept_n.clear();
  const auto& count = scratch.flows_on_link;
  if (drop) count_link_uses(n_plans, plan_of, links_of, scratch, touched);
  for (std::size_t c = 0; c < n_plans; ++c)
    for (std::size_t ph = 0; ph < plan_of(c).phases.size(); ++ph)
      for (std::size_t k = 0; k < plan_of(c).phases[ph].size(); ++k) {
        const auto& links = links_of(c, ph, k);
        const std::size_t keep = drop ? kept_unshared(links, count, scratch.net) : kKeepAll;
        const std::size_t before = kept.size();
        if (keep == kKeepAll) {
          kept.insert(kept.end(), links.begin(), links.end());
        } else {
          for (std::size_t i = 0; i < links.size(); ++i)
            if (count[links[i].link] != 1 || i == keep) kept.push_back(links[i]);
        }
        kept_n.push_back(static_cast<std::uint32_t>(kept.size() - before));
      }
  for (auto l : touched) scratch.flows_on_link[l] = 0;
  auto& rank = scratch.link_rank;  // 1 + the order in which the plans first name each link
  if (rank.size() < scratch.net.link_count()) rank.assign(scratch.net.link_count(), 0);
  auto& used = scratch.touched;
  used.clear();
  for (auto& u : kept) {
    if (rank[u.link] == 0) {
      used.push_back(u.link);
      rank[u.link] = static_cast<std::uint32_t>(used.size());
    }
    u.link = rank[u.link];  // renamed in place: the buffer is scratch
  }
  RunSignature& s = scratch.signature;
  auto& w = s.words;
  w.clear();
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  w.push_back(n_plans);
  for (std::size_t c = 0; c < n_plans; ++c) {
    const auto& plan = plan_of(c);
    w.push_back(static_cast<std::uint64_t>(plan.latency.picoseconds()));
    w.push_back(plan.phases.size());
    for (const auto& phase : plan.phases) w.push_back(phase.size());
  }
  std::size_t flow = 0, at = 0;
  for (std::size_t c = 0; c < n_plans; ++c)
    for (const auto& phase : plan_of(c).phases)
      for (const auto& f : phase) {
        w.push_back(bits(f.bytes));
        w.push_back(kept_n[flow]);
        for (std::uint32_t i = 0; i < kept_n[flow]; ++i, ++at) {
          w.push_back(kept[at].link);
          w.push_back(bits(kept[at].weight));
        }
        ++flow;
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

const FlowLinks& linked_links(const std::vector<LinkedPlan>& plans, std::size_t c, std::size_t ph,
                              std::size_t k) {
  return (*plans[c].links)[ph][k];
}

}  // namespace

void drop_unshared_links(std::vector<CollectivePlan>& plans, PricingScratch& scratch) {
  std::vector<std::uint32_t> touched;
  const auto own = [&](std::size_t c, std::size_t ph, std::size_t k) -> const FlowLinks& {
    return plans[c].phases[ph][k].links;
  };
  count_link_uses(
      plans.size(), [&](std::size_t c) -> const CollectivePlan& { return plans[c]; }, own, scratch,
      touched);
  const auto& count = scratch.flows_on_link;
  for (auto& plan : plans)
    for (auto& phase : plan.phases)
      for (auto& f : phase) {
        const std::size_t kept = kept_unshared(f.links, count, scratch.net);
        if (kept == kKeepAll) continue;
        const auto keep = f.links[kept].link;
        std::erase_if(f.links,
                      [&](const LinkUse& u) { return count[u.link] == 1 && u.link != keep; });
      }
  for (auto l : touched) scratch.flows_on_link[l] = 0;
}

const RunSignature& run_signature(const std::vector<CollectivePlan>& plans,
                                  PricingScratch& scratch) {
  const auto own = [&](std::size_t c, std::size_t ph, std::size_t k) -> const FlowLinks& {
    return plans[c].phases[ph][k].links;
  };
  return signature_of(
      plans.size(), [&](std::size_t c) -> const CollectivePlan& { return plans[c]; }, own, scratch,
      false);
}

const RunSignature& run_signature(const std::vector<LinkedPlan>& plans, PricingScratch& scratch) {
  const auto linked = [&](std::size_t c, std::size_t ph, std::size_t k) -> const FlowLinks& {
    return linked_links(plans, c, ph, k);
  };
  return signature_of(
      plans.size(), [&](std::size_t c) -> const CollectivePlan& { return plans[c].plan; }, linked,
      scratch, true);
}

std::vector<CollectivePlan> dropped_plans(const std::vector<LinkedPlan>& plans,
                                          PricingScratch& scratch) {
  std::vector<CollectivePlan> out;
  out.reserve(plans.size());
  for (std::size_t c = 0; c < plans.size(); ++c) {
    auto& plan = out.emplace_back(plans[c].plan);
    for (std::size_t ph = 0; ph < plan.phases.size(); ++ph)
      for (std::size_t k = 0; k < plan.phases[ph].size(); ++k)
        plan.phases[ph][k].links = linked_links(plans, c, ph, k);
  }
  drop_unshared_links(out, scratch);
  return out;
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
  CollectiveCostCache::Key key{call.op, algo, call.ranks, call.bytes, 0, call.network_share};
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
