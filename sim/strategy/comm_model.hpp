#pragma once
// How a trace's communication ops get their durations. This is where the two replay modes
// differ (DESIGN.md "Scale"):
//  - FoldedComm: only representative ranks are simulated; each collective is priced once with
//    every concurrent copy of it on the cluster running at the same time (all TP groups' all-
//    reduces, all pipelines' sends of one stage), so contention among copies is in the price,
//    and the op gets that fixed duration. Prices are cached.
//  - FullComm: every rank is simulated; a collective starts on the shared flow network when the
//    last member reaches it, and contends with whatever else is on the links at that moment.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/op_graph.hpp"
#include "engine/simulator.hpp"
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

// Routing and pricing state for one cluster, reusable across simulations in one thread (a
// search evaluates hundreds of layouts on the same cluster): the router's route cache, the
// scratch flow network and the prices of collectives run alone.
struct CommContext {
  explicit CommContext(const Topology& topo) : router(topo), scratch(topo) {}
  Router router;
  PricingScratch scratch;
  CollectiveCostCache alone;
  // Measured collective fits (a calibration profile's); null: the model alone.
  const LinkCalibration* calibration = nullptr;
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  virtual OpId add(OpGraph& g, StreamId s, std::string name, const CommRequest& r,
                   std::vector<OpId> deps) = 0;
};

class FoldedComm : public CommModel {
 public:
  // `max_copies` bounds how many concurrent copies a price simulates (the representative's group
  // and the next groups in rank order); beyond it, distant copies are assumed not to share links.
  FoldedComm(const Topology& topo, const Placement& placement, CommContext& context,
             std::size_t max_copies = 64);
  OpId add(OpGraph& g, StreamId s, std::string name, const CommRequest& r,
           std::vector<OpId> deps) override;
  Time price(const CommRequest& r);
  std::size_t prices() const { return cache_.size(); }

 private:
  std::vector<std::vector<std::int32_t>> copies(const CommRequest& r);

  const Topology& topo_;
  const Placement& placement_;
  CommContext& ctx_;
  std::size_t max_copies_;
  std::map<std::tuple<int, int, std::vector<std::int32_t>, double, int, double>, Time> cache_;
  std::map<GroupKind, std::vector<std::vector<std::int32_t>>> groups_;
};

class FullComm : public CommModel {
 public:
  FullComm(const Topology& topo, Simulator& sim, FlowNetwork& net, CommContext& context);
  OpId add(OpGraph& g, StreamId s, std::string name, const CommRequest& r,
           std::vector<OpId> deps) override;

 private:
  struct Pending {
    std::vector<OpDone> dones;
  };
  std::shared_ptr<const CollectivePlan> plan_for(const CommRequest& r);

  const Topology& topo_;
  Simulator& sim_;
  FlowNetwork& net_;
  CommContext& ctx_;
  std::map<std::tuple<int, std::vector<std::int32_t>, double, int, double>,
           std::shared_ptr<const CollectivePlan>>
      plans_;
  std::map<std::pair<std::vector<std::int32_t>, std::uint64_t>, Pending> pending_;
};

}  // namespace meshsim
