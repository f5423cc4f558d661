#include "topology/topology_summary.hpp"

#include "topology/bisection.hpp"

namespace meshsim {

TopologySummary summarize(const Topology& topo, bool with_bisection) {
  TopologySummary s;
  s.gpus = topo.gpu_count();
  s.nodes = topo.node_count();
  const auto& g = topo.graph();
  for (VertexId v = 0; v < topo.vertex_count(); ++v) ++s.vertices[std::string(name_of(g[v].kind))];
  for (std::uint32_t id = 0; id < topo.directed_edge_count(); id += 2)
    ++s.links[std::string(name_of(topo.link(id).kind))];
  if (!topo.gpus().empty()) {
    const VertexId gpu0 = topo.gpus().front();
    for (auto [e, end] = boost::out_edges(gpu0, g); e != end; ++e)
      if (is_nvlink(g[*e].kind)) s.nvlink_Bps += g[*e].bandwidth_Bps;
    s.pcie_Bps = pcie_Bps_of(topo, gpu0);
    s.c2c_Bps = link_Bps_of(topo, gpu0, LinkKind::c2c);
    const std::int32_t node = topo.vertex(gpu0).node;
    double nic_Bps = 0;
    std::size_t node_gpus = 0;
    for (VertexId v = 0; v < topo.vertex_count(); ++v) {
      if (g[v].node != node) continue;
      node_gpus += g[v].kind == VertexKind::gpu;
      if (g[v].kind != VertexKind::nic) continue;
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
        if (is_network(g[*e].kind)) nic_Bps += g[*e].bandwidth_Bps;
    }
    s.network_Bps = node_gpus ? nic_Bps / static_cast<double>(node_gpus) : 0.0;
  }
  if (with_bisection) s.bisection_Bps = bisection_Bps(topo);
  return s;
}

std::vector<std::vector<PathClass>> path_matrix(const Topology& topo, Router& router,
                                                std::size_t max_gpus) {
  const std::size_t n = std::min(max_gpus, topo.gpu_count());
  std::vector<std::vector<PathClass>> m(n, std::vector<PathClass>(n, PathClass::LOC));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      m[i][j] = classify(
          topo, router.gpu_route(static_cast<std::int32_t>(i), static_cast<std::int32_t>(j)));
  return m;
}

}  // namespace meshsim
