#pragma once
// The cluster as a Boost.Graph adjacency_list. Every physical link is full duplex and appears as
// two directed edges, one per direction, each with its own bandwidth: flows in opposite
// directions never share capacity.
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "topology/gpu_spec.hpp"
#include "topology/kinds.hpp"

namespace meshsim {

struct Vertex {
  VertexKind kind = VertexKind::gpu;
  std::string name;        // unique, e.g. "n3/gpu5" or "leaf/r2/u0"
  std::int32_t node = -1;  // node (server or NVL72 rack) index; -1 for fabric switches
  std::int32_t local = 0;  // index among vertices of the same kind in its node
  std::int32_t gpu = -1;   // global GPU rank order, for GPUs
};

struct Link {
  LinkKind kind = LinkKind::nvlink;
  double bandwidth_Bps = 0;    // per direction
  Time latency;                // one traversal
  std::uint32_t id = 0;        // directed edge index, dense in [0, 2·links)
  std::uint32_t physical = 0;  // physical link index; both directions share it
};

using TopologyGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, Vertex, Link>;
using VertexId = TopologyGraph::vertex_descriptor;
using EdgeId = TopologyGraph::edge_descriptor;

// Move-only: a cluster graph can hold millions of edges, so it is never copied by accident.
class Topology {
 public:
  Topology() = default;
  Topology(Topology&&) noexcept = default;
  Topology& operator=(Topology&&) noexcept = default;

  VertexId add_vertex(Vertex v);
  // Adds a full-duplex link: two directed edges of the same kind, bandwidth and latency.
  void add_link(VertexId a, VertexId b, LinkKind kind, double bandwidth_Bps, Time latency);

  const TopologyGraph& graph() const { return *g_; }
  const Vertex& vertex(VertexId v) const { return (*g_)[v]; }
  std::size_t vertex_count() const { return boost::num_vertices(*g_); }
  std::size_t directed_edge_count() const { return edges_.size(); }
  std::size_t link_count() const { return edges_.size() / 2; }
  EdgeId edge(std::uint32_t directed_id) const { return edges_[directed_id]; }
  const Link& link(std::uint32_t directed_id) const { return (*g_)[edges_[directed_id]]; }

  // GPUs in rank order: node-major, then local index (the order placement uses).
  const std::vector<VertexId>& gpus() const { return gpus_; }
  std::size_t gpu_count() const { return gpus_.size(); }
  std::int32_t node_count() const { return nodes_; }
  std::int32_t gpus_per_node() const;
  // Finds a vertex by its unique name; used by tests and error messages.
  std::optional<VertexId> find(const std::string& name) const;
  // Multiplies the bandwidth of every link at `v` (both directions) by `factor`: a degraded
  // cable, NIC or switch port for what-if studies. Routes stay as they were (ECMP does not react
  // to bandwidth either).
  void scale_links_at(VertexId v, double factor);
  // Multiplies the bandwidth of every link of `kind` by `factor` (calibration to a measured
  // bandwidth).
  void scale_links_of_kind(LinkKind kind, double factor);

  // Set by the parametric loader: node k's vertices and directed edges are node 0's shifted by
  // k × vertices_per_node and k × edges_per_node (nodes are stamped out in order, before the
  // fabric). Lets the router reuse node 0's routes for every node.
  struct NodeStride {
    bool uniform = false;
    std::size_t vertices_per_node = 0;
    std::size_t edges_per_node = 0;
  } stride;

  std::string name;
  std::string description;
  std::vector<std::string> sources;
  GpuSpec gpu;
  // The calibration profile the file names ("calibration"), resolved; empty when none.
  std::string calibration_file;

 private:
  std::unique_ptr<TopologyGraph> g_ = std::make_unique<TopologyGraph>();
  std::vector<EdgeId> edges_;
  std::vector<VertexId> gpus_;
  std::int32_t nodes_ = 0;
};

// The bandwidth of the links of `kind` leaving a GPU (per direction); 0 when none.
double link_Bps_of(const Topology& topo, VertexId gpu, LinkKind kind);
// The bandwidth of the PCIe links leaving a GPU (its host link, per direction); 0 when none.
inline double pcie_Bps_of(const Topology& topo, VertexId gpu) {
  return link_Bps_of(topo, gpu, LinkKind::pcie);
}
// A GPU's link to host memory, per direction: PCIe, or NVLink-C2C to its Grace CPU (GB200,
// GH200); 0 when it has neither.
inline double host_link_Bps_of(const Topology& topo, VertexId gpu) {
  return pcie_Bps_of(topo, gpu) + link_Bps_of(topo, gpu, LinkKind::c2c);
}

}  // namespace meshsim
