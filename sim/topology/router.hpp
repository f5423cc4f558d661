#pragma once
// Routes between vertices: least-cost paths, computed on demand and cached (never all pairs up
// front; a 16,384-GPU cluster has 2.7·10^8 GPU pairs).
//
// Cost of a link = its latency + the time to push a 64 KiB chunk through it, so a route prefers
// NVLink over PCIe at equal hop count and fewer hops at equal bandwidth. Integer costs make
// ties exact, which is what equal-cost multipath needs.
// Between two GPUs, a path of NVLinks alone (direct or through NVSwitches) is taken whenever one
// exists, cost aside: NCCL ranks path types first (NVL before C2C, PIX, PHB and SYS;
// src/graph/paths.cc), and CUDA peer-to-peer goes over NVLink. On GB200 the two GPUs under one
// Grace are cheaper to reach through its NVLink-C2C (225 GB/s each, 100 ns) than through an
// NVLink switch (50 GB/s a link), yet they talk over NVLink.
// Rules that make routes physical:
//  - a GPU is never a transit hop (it is not a router; PXN is an NCCL choice, made above this);
//  - a node's internals (PCIe, CPU, NVSwitch, NIC) carry transit traffic only for routes that
//    start or end in that node: servers do not forward for each other.
// Multipath: where equal-cost next hops are NVLinks the traffic is striped over all of them (the
// hardware sprays across NVLinks and NVSwitch planes); elsewhere one next hop is chosen by a
// fixed hash of (source, destination, hop), like ECMP on a switch: deterministic, and spread.
// Between GPUs of different nodes the route is composed from (inside the source node, to one of
// its NICs) + (fabric between NIC switches) + (inside the destination node), minimised over NIC
// pairs: exact, since nodes meet only through their NICs, and far cheaper than a search over
// the whole cluster. Rail affinity: each GPU's own NIC (same local index, as NCCL pairs GPU i
// with NIC i) whenever that is among the least-cost choices. Routes inside node k reuse node 0's,
// shifted, on parametric clusters.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "topology/topology.hpp"

namespace meshsim {

struct Path {
  std::vector<std::uint32_t> edges;  // directed edge ids, source to destination
  double fraction = 1.0;             // share of the route's bytes on this path
  Time latency;                      // sum of link latencies
};

struct Route {
  VertexId src = 0, dst = 0;
  std::vector<Path> paths;  // fractions sum to 1; empty when src == dst
  std::int64_t cost = 0;    // routing cost of each path (they are equal-cost)
  std::size_t hops() const { return paths.empty() ? 0 : paths.front().edges.size(); }
};

class Router {
 public:
  explicit Router(const Topology& topo);

  // Throws meshsim::Error if dst cannot be reached from src.
  const Route& route(VertexId src, VertexId dst);
  const Route& gpu_route(std::int32_t gpu_a, std::int32_t gpu_b);

  std::size_t cached_routes() const { return cache_.size(); }
  std::uint64_t searches() const { return searches_; }
  std::uint64_t vertices_settled() const { return settled_count_; }
  static std::int64_t link_cost(const Link& l);

 private:
  bool search(VertexId src, VertexId dst);  // fills dist_ from dst until src is settled
  bool usable(const Link& l) const { return !nvlink_only_ || is_nvlink(l.kind); }
  bool may_transit(VertexId v, std::int32_t src_node, std::int32_t dst_node) const;
  EdgeId pick(const std::vector<EdgeId>& next, VertexId src, VertexId dst, std::uint32_t hop) const;
  Route compute(VertexId src, VertexId dst);
  std::optional<Route> cross_node(VertexId src, VertexId dst);
  // Inside node k > 0 of a uniform cluster: node 0's route between the same vertices and the
  // edge `shift` that makes it this one, when node 0's route stays inside node 0; else null.
  const Route* node0_route(VertexId src, VertexId dst, std::uint32_t& shift);
  // The route, or node 0's route and the shift that makes it this one (`shift` 0: the route).
  const Route& local_route(VertexId src, VertexId dst, std::uint32_t& shift);
  const std::vector<Path>& fabric_paths(VertexId a, VertexId b);
  const std::vector<std::int64_t>& fabric_distances(VertexId to);
  // Walks every least-cost path between two switches over the fabric's own links, from the
  // distances to `dst` (fabric_distances), striping over every equal choice while the path
  // count allows, else hashing: the paths between two switches never leave the fabric.
  void fabric_expand(std::uint32_t at, VertexId src, VertexId dst,
                     const std::vector<std::int64_t>& to_dst, Path& current, double fraction,
                     std::vector<Path>& out, std::uint32_t hop);
  std::int64_t path_cost(const Path& p) const;
  std::int64_t cost_of(const Link& l) const { return link_costs_[l.id]; }
  // Walks least-cost next hops from `at` to `dst`: striping over equal NVLinks, hashing among
  // others.
  void expand(VertexId at, VertexId src, VertexId dst, Path& current, double fraction,
              std::vector<Path>& out, std::uint32_t hop);

  struct Exit {
    VertexId nic = 0;
    VertexId fabric = 0;    // the switch the NIC plugs into
    std::uint32_t out = 0;  // directed edge NIC → switch (switch → NIC is out ^ 1)
    std::int64_t cost = 0;  // link cost of that edge (both directions cost the same)
  };
  std::vector<std::vector<Exit>> exits_;                         // per node
  std::unordered_map<std::uint64_t, std::vector<Path>> fabric_;  // all least-cost switch paths
  std::vector<VertexId> fabric_vertices_;                        // switches (node -1)
  std::vector<std::uint32_t> fabric_index_;                      // vertex → index among them
  std::vector<std::vector<std::int64_t>> fabric_dist_;  // per target switch, filled on demand
  std::vector<std::int64_t> scratch_a_, scratch_b_;     // cross_node's per-NIC costs
  std::vector<std::pair<std::size_t, std::size_t>> scratch_ties_;

  const Topology& topo_;
  std::unordered_map<std::uint64_t, Route> cache_;
  std::vector<std::int64_t> link_costs_;  // link_cost of each directed link, by id
  struct FabricLink {
    std::uint32_t to;  // fabric index
    std::uint32_t id;  // directed edge id
    std::int64_t cost;
  };
  std::vector<std::uint32_t> fabric_offsets_;  // per fabric vertex: its links in fabric_links_
  std::vector<FabricLink> fabric_links_;
  std::vector<std::int64_t> dist_;
  std::vector<std::uint32_t> seen_;     // epoch stamp: dist_ valid when seen_ == epoch_
  std::vector<std::uint32_t> settled_;  // epoch stamp
  std::uint32_t epoch_ = 0;
  bool nvlink_only_ = false;  // search() and expand() walk NVLinks only (a GPU pair's first try)
  std::uint64_t searches_ = 0, settled_count_ = 0;
};

// A GPU that GPU 0 cannot reach under the routing rules, if any: one breadth-first search, no
// router state needed (the loader calls it on every cluster it builds).
std::optional<VertexId> first_unreachable_gpu(const Topology& topo);

}  // namespace meshsim
