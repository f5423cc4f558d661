#pragma once
// Loading a cluster file. Two forms:
//  explicit:   {"name", "gpu", "vertices", "links"}: the whole graph, written out;
//  parametric: {"name", "nodes", "node" | "node_from", "fabric"}: a node template stamped out
//              `nodes` times and joined by a generated fabric. `--nodes N` overrides the count,
//              so "the same cluster, twice as large" is one flag.
// Either form may carry "description" and "sources" (where its numbers come from).
#include <optional>
#include <string>

#include "core/json_reader.hpp"
#include "topology/topology.hpp"

namespace meshsim {

struct TopologyOptions {
  std::optional<std::int32_t> nodes;  // overrides a parametric file's node count
};

Topology load_topology(const std::string& path, const TopologyOptions& options = {});
Topology load_topology_json(const Json& doc, const std::string& file,
                            const TopologyOptions& options = {});

// Largest cluster a file may describe; a larger one is a clear error instead of an OOM. Measured
// (tests/bench/scale_bench.cpp): one folded training step on 100,000 H100s (12,500 DGX nodes,
// three-tier fat tree) peaks at 0.9 GB and 3.5 min on one core; 2^18 GPUs keeps a step within a
// few GB on a 24 GiB machine.
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 18;

}  // namespace meshsim
