#pragma once
// What `meshsim topo` prints about a cluster: counts of vertices and links, the GPU's peaks, the
// bandwidth per GPU, the bisection and (for small clusters) the NCCL path class of every GPU pair;
// as text or as one JSON document.
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "topology/topology_summary.hpp"

namespace meshsim {

struct TopologyReport {
  const Topology* topology = nullptr;
  TopologySummary summary;
  // Path classes between the first GPUs (`path_matrix`); empty for a cluster too big to list.
  std::vector<std::vector<PathClass>> paths;
};

std::string topology_text(const TopologyReport& r);
// {"name", "gpus", "nodes", "vertices", "links", "gpu": {...}, "per_gpu_Bps": {...},
//  "bisection_Bps", "path_classes" (only with paths)}
Json topology_json(const TopologyReport& r);

}  // namespace meshsim
