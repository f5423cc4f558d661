#include "topology/graphviz.hpp"

// GCC 12 at -O3 flags boost::filtered_graph's optional edge iterator as maybe-uninitialized
// (a known false positive inside Boost.Graph's edge_iterator); the code is Boost's, not ours.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <fmt/format.h>

#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/graphviz.hpp>

namespace meshsim {
namespace {

const char* colour(VertexKind k) {
  switch (k) {
    case VertexKind::gpu:
      return "palegreen";
    case VertexKind::nvswitch:
      return "gold";
    case VertexKind::pcie_switch:
      return "lightblue";
    case VertexKind::cpu:
      return "lightpink";
    case VertexKind::nic:
      return "orange";
    default:
      return "lightgrey";
  }
}

// Keeps the first direction of each full-duplex pair.
struct OneDirection {
  const TopologyGraph* g = nullptr;
  bool operator()(const EdgeId& e) const { return (*g)[e].id % 2 == 0; }
};

}  // namespace

void write_dot(std::ostream& out, const Topology& topo) {
  const auto& g = topo.graph();
  boost::filtered_graph<TopologyGraph, OneDirection> links(g, OneDirection{&g});
  boost::write_graphviz(
      out, links,
      [&](std::ostream& o, VertexId v) {
        o << fmt::format("[label=\"{}\", shape={}, style=filled, fillcolor={}]", g[v].name,
                         g[v].kind == VertexKind::gpu ? "box" : "ellipse", colour(g[v].kind));
      },
      [&](std::ostream& o, const EdgeId& e) {
        o << fmt::format("[label=\"{} {:g} GB/s\", dir=both]", name_of(g[e].kind),
                         g[e].bandwidth_Bps / 1e9);
      },
      [&](std::ostream& o) { o << "graph [label=\"" << topo.name << "\"];\n"; });
}

}  // namespace meshsim
