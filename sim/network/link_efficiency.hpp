#pragma once
// Share of a link's line rate that carries payload. A flow's capacity on a link is
// bandwidth × efficiency; constants come from link-protocol facts, not from fitting collectives.
#include "topology/kinds.hpp"

namespace meshsim {

// NVLink: 128-byte payloads reach ~20 of 25 GB/s per NVLink3 link (sjeaugey, NVIDIA/nccl-tests
//   #149; validation/collectives.md B3) = 0.8; NVLink4/5 use the same packet format.
// PCIe: NCCL counts a Gen4 x16 link (32 GB/s) as 24 GB/s usable = 0.75 (NCCL topo.cc,
//   reference/network-model.md "PCIe = width × speed / 80").
// InfiniBand NDR/HDR: 64b/66b encoding (validation/hardware.md C4) = 0.9697.
// Ethernet/RoCE: 64b/66b encoding as well; RoCE headers are amortised over 4 KiB MTUs.
// CPU interconnect and C2C: treated like PCIe-class and NVLink-class links respectively.
double payload_efficiency(LinkKind kind);

}  // namespace meshsim
