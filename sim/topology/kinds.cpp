#include "topology/kinds.hpp"

#include "core/enum_names.hpp"

namespace meshsim {

std::string_view name_of(VertexKind k) {
  switch (k) {
    case VertexKind::gpu:
      return "gpu";
    case VertexKind::nvswitch:
      return "nvswitch";
    case VertexKind::pcie_switch:
      return "pcie_switch";
    case VertexKind::cpu:
      return "cpu";
    case VertexKind::nic:
      return "nic";
    case VertexKind::leaf_switch:
      return "leaf_switch";
    case VertexKind::spine_switch:
      return "spine_switch";
    case VertexKind::core_switch:
      return "core_switch";
  }
  return "?";
}

std::string_view name_of(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink:
      return "nvlink";
    case LinkKind::nvlink_network:
      return "nvlink_network";
    case LinkKind::pcie:
      return "pcie";
    case LinkKind::cpu_interconnect:
      return "cpu_interconnect";
    case LinkKind::c2c:
      return "c2c";
    case LinkKind::infiniband:
      return "infiniband";
    case LinkKind::ethernet:
      return "ethernet";
  }
  return "?";
}

std::optional<VertexKind> parse_vertex_kind(std::string_view s) {
  return parse_by_name<VertexKind>(kAllVertexKinds, s);
}

std::optional<LinkKind> parse_link_kind(std::string_view s) {
  return parse_by_name<LinkKind>(kAllLinkKinds, s);
}

}  // namespace meshsim
