#pragma once
// Parametric scale-out fabrics that join the NICs of N nodes.
//
//  single_switch: every NIC on one switch (a small lab cluster).
//  fat_tree: leaves, spines and optionally a third tier of cores over pods. Rail-optimized
//    (DGX SuperPOD): NIC r of every node in a unit of `leaf_down_ports` nodes goes to the leaf
//    of rail r, so same-rail traffic crosses one leaf and cross-rail traffic crosses a spine.
//    Otherwise NICs fill leaves in order (top-of-rack). `oversubscription` is the ratio of a
//    leaf's down bandwidth to its up bandwidth (1 = full bisection, 2 = 2:1).
#include <cstdint>
#include <optional>
#include <vector>

#include "core/json_reader.hpp"
#include "topology/node_template.hpp"
#include "topology/topology.hpp"

namespace meshsim {

enum class FabricKind : std::uint8_t { none, single_switch, fat_tree };

struct FabricSpec {
  FabricKind kind = FabricKind::none;
  LinkSpec link;  // NIC ↔ leaf; switch ↔ switch links use its kind and latency
  bool rail_optimized = true;
  std::int32_t leaf_down_ports = 32;
  std::int32_t spines = 0;  // 0: derived (one per leaf up port group); see build_fabric
  double oversubscription = 1.0;
  std::optional<std::int32_t> pod_nodes;  // three tiers when set
  std::int32_t cores = 0;
  double core_oversubscription = 1.0;
};

FabricSpec read_fabric_spec(const JsonRef& ref);

// `nics[n]` are the NIC vertices of node n in rail order.
void build_fabric(const FabricSpec& spec, const std::vector<std::vector<VertexId>>& nics,
                  Topology& topo);

}  // namespace meshsim
