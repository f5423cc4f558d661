#pragma once
// What `meshsim topo` reports about a cluster.
#include <map>
#include <string>
#include <vector>

#include "topology/path_class.hpp"
#include "topology/topology.hpp"

namespace meshsim {

struct TopologySummary {
  std::size_t gpus = 0;
  std::int32_t nodes = 0;
  std::map<std::string, std::size_t> vertices;  // kind → count (kinds present only)
  std::map<std::string, std::size_t> links;     // kind → physical links
  // Per GPU, per direction: NVLink (all NVLink kinds leaving GPU 0), PCIe (GPU 0's host link),
  // NVLink-C2C (GPU 0's link to its Grace CPU, GB200), network (NIC fabric bandwidth of node 0
  // divided by its GPUs).
  double nvlink_Bps = 0, pcie_Bps = 0, c2c_Bps = 0, network_Bps = 0;
  double bisection_Bps = 0;
};

TopologySummary summarize(const Topology& topo, bool with_bisection = true);

// The NCCL path class between every pair of the first `max_gpus` GPUs, like `nvidia-smi topo -m`.
std::vector<std::vector<PathClass>> path_matrix(const Topology& topo, Router& router,
                                                std::size_t max_gpus);

}  // namespace meshsim
