#pragma once
// What `meshsim memory` prints: memory per GPU by category for a training layout (its worst
// pipeline stage) or a serving replica, against the GPU's capacity, with a fits / does-not-fit
// verdict; as text or as one JSON document.
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "parallel/parallel_config.hpp"

namespace meshsim {

struct MemoryRun {
  std::string model;  // the workload's model name
  ParamCount params;
  bool has_architecture = true;  // false: a model given by its parameter count only
  std::string gpu;               // the GPU model
  double gpu_bytes = 0;          // one GPU's memory
  const ParallelConfig* config = nullptr;
  // A training layout: its job and every pipeline stage (the report shows the worst).
  const TrainingMemoryJob* training = nullptr;
  std::vector<MemoryBreakdown> stages;
  // A serving replica: its job and its memory.
  const ServingMemoryJob* serving = nullptr;
  MemoryBreakdown replica;
  double kv_bytes_per_token = 0;
  std::vector<std::string> notes;  // printed after the verdict, "notes" in JSON
};

// The breakdown the verdict is about: the worst stage, or the serving replica.
MemoryBreakdown reported_memory(const MemoryRun& run);

std::string memory_text(const MemoryRun& run);
// {"mode", "mesh", "params", "per_gpu_bytes", "model_state_bytes", "total_bytes", "gpu",
//  "gpu_bytes", "fits", "activations_modeled", "notes"}, with "stage", "stage_total_bytes" and
//  "stage_layers" (train: layers per model chunk) or "kv_bytes_per_token" (serve).
Json memory_run_json(const MemoryRun& run);

}  // namespace meshsim
