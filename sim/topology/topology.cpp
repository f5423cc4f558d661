#include "topology/topology.hpp"

#include <algorithm>
#include <stdexcept>

namespace meshsim {

VertexId Topology::add_vertex(Vertex v) {
  if (v.kind == VertexKind::gpu) v.gpu = static_cast<std::int32_t>(gpus_.size());
  if (v.node >= nodes_) nodes_ = v.node + 1;
  const VertexId id = boost::add_vertex(std::move(v), *g_);
  if ((*g_)[id].kind == VertexKind::gpu) gpus_.push_back(id);
  return id;
}

void Topology::add_link(VertexId a, VertexId b, LinkKind kind, double bandwidth_Bps, Time latency) {
  if (a == b) throw std::logic_error("link from a vertex to itself: " + (*g_)[a].name);
  const auto physical = static_cast<std::uint32_t>(edges_.size() / 2);
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    Link l{kind, bandwidth_Bps, latency, static_cast<std::uint32_t>(edges_.size()), physical};
    edges_.push_back(boost::add_edge(from, to, l, *g_).first);
  }
}

std::int32_t Topology::gpus_per_node() const {
  return nodes_ == 0 ? 0 : static_cast<std::int32_t>(gpus_.size()) / nodes_;
}

std::optional<VertexId> Topology::find(const std::string& vertex_name) const {
  for (VertexId v = 0; v < vertex_count(); ++v)
    if ((*g_)[v].name == vertex_name) return v;
  return std::nullopt;
}

void Topology::scale_links_at(VertexId v, double factor) {
  // Directed graph: each link's reverse edge is its partner id (2p, 2p + 1).
  std::vector<std::uint32_t> ids;
  for (auto [it, end] = boost::out_edges(v, *g_); it != end; ++it) ids.push_back((*g_)[*it].id);
  for (auto id : ids) {
    (*g_)[edges_[id]].bandwidth_Bps *= factor;
    (*g_)[edges_[id ^ 1u]].bandwidth_Bps *= factor;
  }
}

void Topology::scale_links_of_kind(LinkKind kind, double factor) {
  for (auto e : edges_)
    if ((*g_)[e].kind == kind) (*g_)[e].bandwidth_Bps *= factor;
}

double link_Bps_of(const Topology& topo, VertexId gpu, LinkKind kind) {
  const auto& g = topo.graph();
  double bps = 0;
  for (auto [e, end] = boost::out_edges(gpu, g); e != end; ++e)
    if (g[*e].kind == kind) bps += g[*e].bandwidth_Bps;
  return bps;
}

}  // namespace meshsim
