#pragma once
// What a vertex of the cluster graph is, and what a link is made of.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace meshsim {

enum class VertexKind : std::uint8_t {
  gpu,
  nvswitch,
  pcie_switch,
  cpu,  // a CPU socket, i.e. a NUMA domain
  nic,
  leaf_switch,
  spine_switch,
  core_switch,
};
inline constexpr std::array kAllVertexKinds{
    VertexKind::gpu, VertexKind::nvswitch,    VertexKind::pcie_switch,  VertexKind::cpu,
    VertexKind::nic, VertexKind::leaf_switch, VertexKind::spine_switch, VertexKind::core_switch};

enum class LinkKind : std::uint8_t {
  nvlink,            // GPU ↔ NVSwitch or GPU ↔ GPU inside a node
  nvlink_network,    // NVLink switch trays spanning a rack (GB200 NVL72)
  pcie,              // GPU/NIC ↔ PCIe switch ↔ CPU root complex
  cpu_interconnect,  // UPI / xGMI between sockets
  c2c,               // NVLink-C2C between a Grace CPU and its GPUs
  infiniband,
  ethernet,  // Ethernet / RoCE
};
inline constexpr std::array kAllLinkKinds{
    LinkKind::nvlink, LinkKind::nvlink_network, LinkKind::pcie,    LinkKind::cpu_interconnect,
    LinkKind::c2c,    LinkKind::infiniband,     LinkKind::ethernet};

std::string_view name_of(VertexKind k);
std::string_view name_of(LinkKind k);
std::optional<VertexKind> parse_vertex_kind(std::string_view s);
std::optional<LinkKind> parse_link_kind(std::string_view s);

constexpr bool is_nvlink(LinkKind k) {
  return k == LinkKind::nvlink || k == LinkKind::nvlink_network;
}
constexpr bool is_network(LinkKind k) {
  return k == LinkKind::infiniband || k == LinkKind::ethernet;
}
constexpr bool is_fabric_switch(VertexKind k) {
  return k == VertexKind::leaf_switch || k == VertexKind::spine_switch ||
         k == VertexKind::core_switch;
}

}  // namespace meshsim
