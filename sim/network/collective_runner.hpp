#pragma once
// Running collectives on the flow network, pricing them, and choosing the algorithm like NCCL's
// tuner: predict every applicable (algorithm, protocol) and take the fastest.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "network/collective_plan.hpp"
#include "network/flow_network.hpp"

namespace meshsim {

// Starts `plan` now on `net`: waits the latency, then runs its phases one after another, and
// calls `done` at the end. Several plans may run at once and contend for links.
void run_collective(FlowNetwork& net, Simulator& sim, const CollectivePlan& plan,
                    std::function<void()> done);

// Time of one plan run alone on an idle cluster.
Time time_alone(const Topology& topo, const CollectivePlan& plan);

// A run's signature (run_signature): its words and their hash.
struct RunSignature {
  std::vector<std::uint64_t> words;
  std::uint64_t hash = 0;
};

// An idle flow network to price plans on, reused across prices: building one for a cluster of
// thousands of GPUs costs more than most prices. Idle between uses; times are measured from
// each start.
struct PricingScratch {
  explicit PricingScratch(const Topology& topo) : net(topo, sim) {}
  Simulator sim;
  FlowNetwork net;
  std::vector<std::uint32_t> flows_on_link;  // drop_unshared_links's counts, zero between uses
  std::vector<std::uint32_t> link_rank;      // run_signature's renaming, zero between uses
  // run_signature's buffers, kept to be reused: a 405B search signs ~13,000 runs of up to 10^6
  // link uses, and fresh buffers of that size cost a page fault per 4 KiB each time.
  RunSignature signature;
  std::vector<LinkUse> kept_links;
  std::vector<std::uint32_t> kept_count, touched;
};
Time time_alone(PricingScratch& scratch, const CollectivePlan& plan);

// Before `plans` run together on the idle `scratch` network: drops the links no rate can depend
// on, with every rate unchanged to the bit. A link that only one flow of all the plans crosses
// (any phase) never shares its capacity: its fair share stays capacity/weight until that flow
// is rated, after which it is idle. Of such links a flow keeps the one the solver would pick
// among them: the first of least share in its list (MaxMinSolver breaks ties on the order links
// were first touched, and only this flow touches them), so every bottleneck is found where it
// was. A DP ring across a fabric crosses thousands of links it has to itself (its NVLink and
// PCIe hops, its NIC and leaf ports), and every re-solve at a copy's completion walked them all.
void drop_unshared_links(std::vector<CollectivePlan>& plans, PricingScratch& scratch);

// What the times of `plans`, started together on the idle `scratch` network with its flow ids
// renumbered (FlowNetwork::renumber_flows), depend on: the plans' latencies, phases, flows, bytes
// and link weights in their order, each link renamed by the order the plans first name it, and
// those links' capacities. The replay (drop_unshared_links, FlowNetwork, MaxMinSolver) reads a
// link only through its capacity and the flows crossing it, and breaks ties on flow ids and on
// the order links are first met, never on link ids; it reads absolute times only through their
// differences. So plans with equal signatures end at the same times to the bit. The same data-
// parallel group at every pipeline stage is such a case on a uniform cluster: its copies are the
// groups of other nodes, wired alike.
// The result lives in scratch.signature until the next call.
const RunSignature& run_signature(const std::vector<CollectivePlan>& plans,
                                  PricingScratch& scratch);

// A plan whose flows' links are kept elsewhere (the folded pricing's cache of planned links,
// shared by every price of the copy): flow k of phase ph crosses (*links)[ph][k]; the plan's own
// flows have no links. Pricing 64 copies of a data-parallel group of hundreds of GPUs copied
// ~10^5-10^6 link uses per price, most of them dropped by drop_unshared_links right after.
struct LinkedPlan {
  CollectivePlan plan;
  std::shared_ptr<const std::vector<std::vector<FlowLinks>>> links;  // per phase, per flow
};
// The signature of the plans as drop_unshared_links leaves them, without copying their links.
const RunSignature& run_signature(const std::vector<LinkedPlan>& plans, PricingScratch& scratch);
// The plans with their links, as drop_unshared_links leaves them: what runs on a signature miss.
std::vector<CollectivePlan> dropped_plans(const std::vector<LinkedPlan>& plans,
                                          PricingScratch& scratch);

// Representative times (plans[0]'s, from the common start to its end) by run signature, shared by
// threads (lookups take a shared lock). Bounded: past `kMaxWords` signature words it starts over.
class RunTimeCache {
 public:
  std::optional<Time> find(const RunSignature& s) const;
  void insert(const RunSignature& s, Time t);
  std::size_t size() const;  // signatures held

 private:
  static constexpr std::size_t kMaxWords = std::size_t{16} << 20;  // 128 MB
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint64_t, std::vector<std::pair<std::vector<std::uint64_t>, Time>>> map_;
  std::size_t words_ = 0;
};

struct PricedCollective {
  CollectiveAlgo algo = CollectiveAlgo::ring;
  Protocol protocol = Protocol::simple;
  Time time;
};

// Memoises prices by (op, algorithm choice, group, bytes, concurrent pattern), so a collective
// repeated every layer of every step costs a lookup. Keys hash the group once; equal hashes
// still compare the full rank lists.
class CollectiveCostCache {
 public:
  struct Key {
    CollectiveOp op;
    std::optional<CollectiveAlgo> algo;  // nullopt: auto
    std::vector<std::int32_t> ranks;
    double bytes;
    std::uint64_t pattern;  // identifies what else runs concurrently; 0 = alone
    double network_share = 1.0;
    bool operator==(const Key&) const = default;
  };
  const PricedCollective* find(const Key& k) const;
  void insert(Key k, PricedCollective p);
  std::size_t size() const { return map_.size(); }
  std::uint64_t hits() const { return hits_; }

 private:
  struct Hash {
    std::size_t operator()(const Key& k) const;
  };
  std::unordered_map<Key, PricedCollective, Hash> map_;
  mutable std::uint64_t hits_ = 0;
};

// Prices `call` alone. With `algo` set, the best protocol for that algorithm; otherwise the best
// (algorithm, protocol) pair. Throws Error when the forced algorithm cannot run this call.
PricedCollective price_collective(const Topology& topo, Router& router, const CollectiveCall& call,
                                  std::optional<CollectiveAlgo> algo,
                                  CollectiveCostCache* cache = nullptr,
                                  PricingScratch* scratch = nullptr);

}  // namespace meshsim
