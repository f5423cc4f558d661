#pragma once
// Simulation results under DESIGN.md's JSON keys, shared by `memory`, `train`, `search`, `serve`
// and `calibrate`: the mesh, memory by category, a step's metrics, a serving run's metrics.
#include <map>
#include <string>

#include "core/json_reader.hpp"
#include "memory/memory_model.hpp"
#include "parallel/parallel_config.hpp"
#include "serving/serving_sim.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

// {"dp", "tp", "pp", "cp", "ep", "fsdp"}: fsdp is the DP ranks a ZeRO/FSDP shard is spread over
// (dp unless HSDP).
Json mesh_json(const Mesh& m);
// DESIGN.md's per-category memory keys, in bytes.
Json memory_json(const MemoryBreakdown& b);
// {key: value} of a map, in key order.
Json map_json(const std::map<std::string, double>& m);
// The metrics of a simulated step under DESIGN.md's `train` keys (shared by train and search).
Json training_json(const TrainingResult& r);
// {"mean", "p50", "p90", "p99"} in seconds.
Json latency_json(const LatencySummary& s);
// A serving run's metrics under DESIGN.md's `serve` keys.
Json serving_json(const ServingResult& r);

}  // namespace meshsim
