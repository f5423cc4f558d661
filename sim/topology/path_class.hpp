#pragma once
// NCCL's path classes between two GPUs, best to worst (NVIDIA/nccl src/graph/paths.cc):
// LOC same GPU; NVL NVLink only (direct or through NVSwitch); C2C through a Grace C2C link;
// PIX one PCIe switch; PXB several PCIe switches, no CPU; PHB through one CPU's host bridge;
// SYS across the CPU interconnect (UPI/xGMI); NET through a NIC.
#include <string_view>

#include "topology/router.hpp"

namespace meshsim {

enum class PathClass : std::uint8_t { LOC, NVL, C2C, PIX, PXB, PHB, SYS, NET };
std::string_view name_of(PathClass c);

PathClass classify(const Topology& topo, const Route& route);

}  // namespace meshsim
