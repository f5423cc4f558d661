#pragma once
// One simulated training step as `meshsim train` reports it: the text summary (step time,
// throughput, MFU/HFU, where the time goes, memory, checkpoint and goodput, the critical path of
// each simulated rank) and its JSON document; and, for a layout that does not fit a GPU's memory,
// the memory by category and the verdict instead of a step time.
#include <string>

#include "core/json_reader.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

// The run a report describes, beside its result.
struct TrainingRun {
  std::string model;         // the workload's model name
  std::string cluster;       // the cluster file's stem
  std::string gpu;           // the GPU model
  std::string kernel_model;  // ComputeModel::describe() of the run
  const TrainingSetup* setup = nullptr;
  double gpu_bytes = 0;  // one GPU's memory
};

bool fits_memory(const TrainingResult& r, const TrainingRun& run);

std::string training_text(const TrainingResult& r, const TrainingRun& run);
// training_json(r) with the run's layout, batch, memory verdict, reliability and per-rank
// breakdown (DESIGN.md's `train` keys).
Json training_run_json(const TrainingResult& r, const TrainingRun& run);

// A layout that needs more memory than a GPU has: the memory by category (text) or the
// {"fits": false, ...} document (JSON), and the verdict line that says by how much and what uses
// less. No step time: a real run would stop with CUDA out of memory.
std::string does_not_fit_text(const TrainingResult& r, const TrainingRun& run);
Json does_not_fit_json(const TrainingResult& r, const TrainingRun& run);
std::string does_not_fit_verdict(const TrainingResult& r, const TrainingRun& run);

}  // namespace meshsim
