#include "topology/path_class.hpp"

namespace meshsim {

std::string_view name_of(PathClass c) {
  switch (c) {
    case PathClass::LOC:
      return "LOC";
    case PathClass::NVL:
      return "NVL";
    case PathClass::C2C:
      return "C2C";
    case PathClass::PIX:
      return "PIX";
    case PathClass::PXB:
      return "PXB";
    case PathClass::PHB:
      return "PHB";
    case PathClass::SYS:
      return "SYS";
    case PathClass::NET:
      return "NET";
  }
  return "?";
}

PathClass classify(const Topology& topo, const Route& route) {
  if (route.paths.empty()) return PathClass::LOC;
  // The worst class over all paths of the route (they are equal-cost, so normally alike).
  PathClass worst = PathClass::LOC;
  for (const auto& path : route.paths) {
    bool nic = false, sys = false, cpu = false, c2c = false, all_nvlink = true;
    int pcie_switches = 0;
    for (auto id : path.edges) {
      const Link& l = topo.link(id);
      all_nvlink = all_nvlink && is_nvlink(l.kind);
      sys = sys || l.kind == LinkKind::cpu_interconnect;
      c2c = c2c || l.kind == LinkKind::c2c;
      const Vertex& to = topo.vertex(boost::target(topo.edge(id), topo.graph()));
      nic = nic || to.kind == VertexKind::nic;
      cpu = cpu || to.kind == VertexKind::cpu;
      pcie_switches += to.kind == VertexKind::pcie_switch;
    }
    PathClass c = nic                  ? PathClass::NET
                  : sys                ? PathClass::SYS
                  : cpu                ? (c2c ? PathClass::C2C : PathClass::PHB)
                  : all_nvlink         ? PathClass::NVL
                  : pcie_switches > 1  ? PathClass::PXB
                  : pcie_switches == 1 ? PathClass::PIX
                                       : PathClass::SYS;
    if (c > worst) worst = c;
  }
  return worst;
}

}  // namespace meshsim
