#pragma once
// NCCL's latency model (NVIDIA/nccl src/graph/tuning.cc, as summarised in
// ../shared/reference/network-model.md): a base latency per algorithm and protocol plus a
// per-step hardware latency per link class. All values in microseconds.
#include "core/units.hpp"
#include "network/collective.hpp"

namespace meshsim {

enum class HopClass : std::uint8_t { nvlink, pcie, network };

// Base latency: Ring/Tree LL 6.6/6.8, LL128 14/14, Simple 8.4/8.4.
double nccl_base_latency_us(CollectiveAlgo algo, Protocol p);
// Per-step latency. NVLink ring .6/1.9/3.4 (LL/LL128/Simple); PCIe ring 1/2.5/5.7; network
// ring 2.7/4/14; network tree 5/8.5/14; NVLS Simple 25 per phase inside a node.
double nccl_hop_latency_us(CollectiveAlgo algo, Protocol p, HopClass hop);

// Protocol bandwidth derate (reference/network-model.md): LL ×0.5 (8-byte stores carry 4 bytes
// of data and a 4-byte flag), LL128 ×0.92, Simple ×1. Tree adds ×0.92; NVLS on Hopper ×0.85.
double protocol_efficiency(CollectiveAlgo algo, Protocol p);

}  // namespace meshsim
