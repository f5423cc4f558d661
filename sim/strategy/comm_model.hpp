#pragma once
// How a trace's communication ops get their durations. This is where the two replay modes
// differ (DESIGN.md "Scale"):
//  - FoldedComm: only representative ranks are simulated; each collective is priced once with
//    every concurrent copy of it on the cluster running at the same time (all TP groups' all-
//    reduces, all pipelines' sends of one stage), so contention among copies is in the price,
//    and the op gets that fixed duration. Prices are cached. Different collectives that overlap
//    in time on a rank (TP beside DP beside PP, an FSDP all-gather beside a reduce-scatter)
//    share links through `share`: max-min fairness rates each one's flows among the others'
//    (every copy of each), once per set of shapes, and the replay runs it at that rate while
//    they overlap (engine/replay.hpp ReplayInterference). Assumptions (README "Training"): only
//    flows crossing the representative's links compete with it; a neighbour is in its heaviest
//    phase.
//  - FullComm: every rank is simulated; a collective starts on the shared flow network when the
//    last member reaches it, and contends with whatever else is on the links at that moment.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/op_graph.hpp"
#include "engine/simulator.hpp"
#include "network/collective_plan.hpp"
#include "network/collective_runner.hpp"
#include "network/link_calibration.hpp"
#include "parallel/placement.hpp"
#include "topology/router.hpp"

namespace meshsim {

struct CommRequest {
  GroupKind kind = GroupKind::tp;
  CollectiveCall call;                 // ranks are GPU indices, in group order
  std::optional<CollectiveAlgo> algo;  // nullopt: NCCL-like automatic choice
  // Fraction of the collective this op is: one step of a ring exchange is a ring all-gather's
  // time divided by (n − 1).
  double fraction = 1.0;
  std::uint64_t instance = 0;  // identical on every member for the same logical collective
  bool sender_only = false;    // point-to-point: only the sender has an op
};

// The folded model's priced collectives and link-sharing rates, kept with the context so that
// the layouts of a search that share a mesh share them too. A collective's copies depend on the
// placement, so a key holds the mesh and rank order as well as the call. Every cached value is a
// function of its key alone, so results do not depend on what was cached before.
struct FoldedPrices {
  // One phase of a collective with every copy's flows, for link sharing: flows [first, end) of
  // the flow table, the representative's first.
  struct Phase {
    std::uint32_t first = 0, end = 0;
    std::vector<double> rep_bytes;  // the representative's flows
    double alone_s = 0;             // its time alone at max-min rates
  };
  // What link sharing depends on: the groups, their flows and the algorithm, not the bytes
  // (max-min rates do not depend on sizes, and every flow of a plan scales with the message).
  struct Shape {
    std::int32_t example = 0;              // a priced collective of this shape
    std::vector<std::uint32_t> rep_links;  // the representative's, sorted (with `phases`)
    std::vector<Phase> phases;             // filled when first shared
  };
  struct Priced {
    CommRequest request;
    CollectiveAlgo algo = CollectiveAlgo::ring;
    Protocol protocol = Protocol::simple;
    Time alone;    // the representative's time, its copies running
    Time latency;  // of it, the α term before the flows start
    Time price;    // `alone` corrected by a calibration profile
    std::int32_t shape = 0;
  };
  // Placement (mesh, rank order), kind, op, ranks, then bytes, network share, requested
  // algorithm, fraction, calibration and copies bound.
  using Key =
      std::tuple<std::array<std::int64_t, 5>, std::array<int, 4>, int, int,
                 std::vector<std::int32_t>, double, double, int, double, const void*, std::size_t>;
  // Hashed rather than ordered: a search looks prices up millions of times, and ordered keys
  // compared whole rank lists of equal prefixes at every level of the tree. Nothing iterates
  // these tables, so their order never shows.
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  // Placement, kind, op, ranks, the algorithm and protocol used, copies bound.
  using ShapeKey = std::tuple<std::array<std::int64_t, 5>, std::array<int, 4>, int, int,
                              std::vector<std::int32_t>, int, int, std::size_t>;
  std::unordered_map<Key, std::int32_t, KeyHash> index;
  std::vector<Priced> priced;
  std::map<ShapeKey, std::int32_t> shape_index;
  std::vector<Shape> shapes;
  std::map<std::vector<std::int32_t>, double> flow_rates;  // by shapes {self, sorted others}
  std::vector<double> capacity;                            // per directed link, payload bytes/s
  std::optional<MaxMinSolver> solver;
  std::vector<FlowLinks> flow_table;  // every shared phase's flows
  std::size_t flow_link_uses = 0;     // summed sizes of flow_table (bounded: see share)
  std::vector<std::uint32_t> flows;   // scratch for one solve
  std::vector<double> rates;
  std::vector<std::uint32_t> mark;  // per link: `epoch` when in the marked set
  std::uint32_t epoch = 0;
  std::map<std::vector<std::int32_t>, GroupLayout> layouts;  // by group (FoldedComm::layout)
  // Every flow's links of one copy's plan, per phase, by (ranks, op, algorithm): they depend
  // neither on the bytes nor on the protocol (which scales every flow's bytes by its wire
  // factor), and neighbouring pipeline stages price largely the same copies (a stage's
  // data-parallel copies run into the next stages). Bounded like the flow table.
  using LinksKey = std::tuple<std::vector<std::int32_t>, int, int>;
  using PlanLinks = std::vector<std::vector<FlowLinks>>;  // per phase, per flow
  std::map<LinksKey, std::shared_ptr<const PlanLinks>> plan_links;
  std::size_t plan_link_uses = 0;
  std::unordered_map<Key, Time, KeyHash> unloaded;  // FoldedComm::unloaded_price, by price key
};

// Folded prices and plan links shared by the threads of a search: a collective one worker
// priced (every copy simulated, tens of milliseconds for a data-parallel group of thousands of
// GPUs) is not priced again by another (Llama 3.1 405B on 16,384 GPUs: 36 % of the prices were
// priced twice on two threads), nor a group routed again (there 134,000 plans for 64,000
// groups). Prices are consulted only when a context's own table misses, so the hot path takes
// no lock; a price and a plan's links are functions of their keys alone (FoldedPrices), so
// which thread made one first does not show in any result. Bounded: past `kMaxEntries` prices
// or `kMaxLinkUses` links the table starts over.
class SharedPrices {
 public:
  struct Value {
    CollectiveAlgo algo = CollectiveAlgo::ring;
    Protocol protocol = Protocol::simple;
    Time alone, latency, price;
  };
  std::optional<Value> find(const FoldedPrices::Key& key) const;
  void insert(const FoldedPrices::Key& key, const Value& value);
  std::shared_ptr<const FoldedPrices::PlanLinks> find_links(
      const FoldedPrices::LinksKey& key) const;
  void insert_links(const FoldedPrices::LinksKey& key,
                    std::shared_ptr<const FoldedPrices::PlanLinks> links);
  // Representative times by run signature (a stage's data-parallel copies run like the others').
  const std::shared_ptr<RunTimeCache> runs = std::make_shared<RunTimeCache>();

 private:
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 17;
  // 32 M link uses of 16 bytes: at most what two threads' own tables held (16 M each).
  static constexpr std::size_t kMaxLinkUses = std::size_t{32} << 20;
  mutable std::shared_mutex mutex_, links_mutex_;
  std::unordered_map<FoldedPrices::Key, Value, FoldedPrices::KeyHash> map_;
  std::map<FoldedPrices::LinksKey, std::shared_ptr<const FoldedPrices::PlanLinks>> links_;
  std::size_t link_uses_ = 0;
};

// Routing and pricing state for one cluster, reusable across simulations in one thread (a
// search evaluates hundreds of layouts on the same cluster): the router's route cache, the
// scratch flow network and the prices of collectives run alone.
struct CommContext {
  explicit CommContext(const Topology& topo, std::shared_ptr<SharedPrices> shared_prices = {})
      : router(topo),
        scratch(topo),
        shared(std::move(shared_prices)),
        runs(shared ? shared->runs : std::make_shared<RunTimeCache>()) {}
  Router router;
  PricingScratch scratch;
  CollectiveCostCache alone;
  FoldedPrices folded;
  // The search's prices across threads; null: this context's own only.
  std::shared_ptr<SharedPrices> shared;
  // Times of concurrent plans by run signature: the search's (`shared`'s) or this context's.
  std::shared_ptr<RunTimeCache> runs;
  // Measured collective fits (a calibration profile's); null: the model alone.
  const LinkCalibration* calibration = nullptr;
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  virtual OpId add(OpGraph& g, StreamId s, std::string_view name, const CommRequest& r,
                   std::span<const OpId> deps) = 0;
  // The cluster the collectives run on (what a request's shape may depend on: which node each
  // member sits on); null where nothing is priced.
  virtual const Topology* topology() const { return nullptr; }
};

class FoldedComm : public CommModel {
 public:
  // `max_copies` bounds how many concurrent copies a price simulates (the representative's group
  // and the next groups in rank order); beyond it, distant copies are assumed not to share links.
  FoldedComm(const Topology& topo, const Placement& placement, CommContext& context,
             std::size_t max_copies = 64);
  OpId add(OpGraph& g, StreamId s, std::string_view name, const CommRequest& r,
           std::span<const OpId> deps) override;
  const Topology* topology() const override { return &topo_; }
  Time price(const CommRequest& r);
  // A lower bound on price(r) that simulates nothing: the representative's plan, each flow at
  // the capacity of its narrowest link as if nothing else were on it (a max-min rate never
  // exceeds capacity / weight on any of its links, whatever shares them), the phases one after
  // another, plus the plan's latency; the least over the algorithms and protocols `price` could
  // pick (it picks by simulating each alone, which would cost more than this). Planning one
  // copy of a data-parallel group of thousands of GPUs instead of simulating 64 is what lets a
  // search bound the layouts whose gradient traffic decides them (evaluate_top_k). Zero where a
  // calibration profile has a measured fit for the collective (it may price it below the
  // model). A function of the request alone, cached like the prices.
  Time unloaded_price(const CommRequest& r);

  // The priced collective an op added here stands for (-1: none, or a collective of no time).
  std::int32_t collective_of(OpId op) const;
  // Collective `self`'s rate (0, 1] while `others` run beside it on the same ranks, every copy
  // of each running: 1 when no link carries two of them. Cached per set.
  double share(std::int32_t self, std::vector<std::int32_t> others);

 private:
  std::vector<std::vector<std::int32_t>> copies(const CommRequest& r);
  std::vector<CollectivePlan> plans_of(const FoldedPrices::Priced& p);
  // Each copy's plan with its links held from the links cache, not copied (index_of).
  std::vector<LinkedPlan> linked_plans_of(const FoldedPrices::Priced& p);
  // plan_collective with the copy's links from `plan_links` when it was planned before.
  std::optional<LinkedPlan> linked_plan_of(const CollectiveCall& call, CollectiveAlgo algo,
                                           Protocol protocol);
  std::optional<CollectivePlan> plan_of(const CollectiveCall& call, CollectiveAlgo algo,
                                        Protocol protocol);
  const GroupLayout& layout(const std::vector<std::int32_t>& ranks);
  const std::vector<FoldedPrices::Phase>& phases_of(std::int32_t shape);
  // The representative's time in `phase` with the `background` flows (flow table indices) on the
  // links: its slowest flow's bytes over its max-min rate.
  double phase_s(const FoldedPrices::Phase& phase, const std::vector<std::uint32_t>& background);
  void mark(const std::vector<std::uint32_t>& links);  // the set `marked` tests against
  bool marked(const FlowLinks& links) const;           // crosses a marked link
  // The flow rate of shape shapes[0] beside shapes[1..] (sorted), in (0, 1].
  double flow_rate(const std::vector<std::int32_t>& shapes);
  std::int32_t index_of(const CommRequest& r);
  FoldedPrices::Key key_of(const CommRequest& r) const;

  const Topology& topo_;
  const Placement& placement_;
  CommContext& ctx_;
  std::size_t max_copies_;
  FoldedPrices& f_;                          // ctx_.folded
  std::vector<std::int32_t> op_collective_;  // by OpId
  std::map<GroupKind, std::vector<std::vector<std::int32_t>>> groups_;
};

class FullComm : public CommModel {
 public:
  FullComm(const Topology& topo, Simulator& sim, FlowNetwork& net, CommContext& context);
  OpId add(OpGraph& g, StreamId s, std::string_view name, const CommRequest& r,
           std::span<const OpId> deps) override;
  const Topology* topology() const override { return &topo_; }

 private:
  struct Pending {
    std::vector<OpDone> dones;
  };
  std::shared_ptr<const CollectivePlan> plan_for(const CommRequest& r);

  const Topology& topo_;
  Simulator& sim_;
  FlowNetwork& net_;
  CommContext& ctx_;
  std::map<std::tuple<int, std::vector<std::int32_t>, double, double, int, double>,
           std::shared_ptr<const CollectivePlan>>
      plans_;
  std::map<std::pair<std::vector<std::int32_t>, std::uint64_t>, Pending> pending_;
};

}  // namespace meshsim
