#pragma once
// Turning a collective into flows. Each algorithm becomes a latency term (NCCL's α model) and
// one or more phases of concurrent flows on the topology's routes; a phase starts when the
// previous one ends. Pipelined algorithms (ring, tree, NVLS) are one phase in which every edge
// is busy for the whole operation: one coupled flow per channel.
//
// Multi-node rings and trees use one channel per GPU of a node, as NCCL does to use every NIC:
// channel c enters and leaves each node on rail c. A hop between nodes whose ranks sit on
// different rails goes through the NVLink peer on the destination's rail (PXN), so inter-node
// traffic stays on its rail.
#include <optional>
#include <string>
#include <vector>

#include "network/collective.hpp"
#include "network/link_usage.hpp"
#include "network/nccl_latency.hpp"
#include "topology/router.hpp"

namespace meshsim {

// One flow of a phase: `bytes` (wire bytes: payload / protocol efficiency) moved over `links`.
// A pipelined algorithm's channel is one flow whose weight on a link counts the edges crossing
// it, so the whole ring advances at the pace of its most loaded link, as a real ring does.
struct PlannedFlow {
  FlowLinks links;
  double bytes = 0;
};

struct CollectivePlan {
  CollectiveAlgo algo = CollectiveAlgo::ring;
  Protocol protocol = Protocol::simple;
  Time latency;
  double wire_factor = 1.0;  // wire bytes per payload byte: 1 / protocol efficiency
  std::vector<std::vector<PlannedFlow>> phases;
};

// How a group lies on the cluster.
struct GroupLayout {
  std::vector<std::vector<std::int32_t>> per_node;  // members per node, nodes in first-seen order
  std::int32_t ranks_per_node = 0;                  // 0 when nodes hold different counts
  HopClass intra = HopClass::nvlink;                // worst intra-node hop class
  bool nvswitch = false;                            // all intra-node routes cross an NVSwitch
};

GroupLayout layout_of(const Topology& topo, Router& router, const std::vector<std::int32_t>& ranks);

// The plan of `call` with `algo` and `protocol`, or nullopt with the reason in `why_not` when
// the algorithm does not apply (NVLS without NVSwitch, tree on one node, ...).
// With `with_flows` false only the latency, wire factor and applicability are worked out (the
// phases stay empty): enough to price another protocol of an algorithm already simulated, since
// every flow of a plan scales by the same wire factor and max-min rates do not depend on bytes.
std::optional<CollectivePlan> plan_collective(const Topology& topo, Router& router,
                                              const CollectiveCall& call, CollectiveAlgo algo,
                                              Protocol protocol, std::string* why_not = nullptr,
                                              bool with_flows = true);
// The same with the group's layout worked out once by the caller (pricing plans one call many
// times: every algorithm, every protocol).
std::optional<CollectivePlan> plan_collective(const Topology& topo, Router& router,
                                              const CollectiveCall& call, const GroupLayout& layout,
                                              CollectiveAlgo algo, Protocol protocol,
                                              std::string* why_not, bool with_flows);

}  // namespace meshsim
