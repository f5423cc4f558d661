#pragma once
// The layers per pipeline chunk a training step runs, worked out without simulating it: what
// `memory` reports for the layout `train` would run.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compute/compute_model.hpp"
#include "model/model_spec.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

// The note of a split balanced by time that did not fit memory, replaced by the even split.
inline constexpr std::string_view kEvenFallbackNote =
    "stages balanced by time did not fit memory; layers split evenly";

struct TrainingSplit {
  std::vector<std::int64_t> chunk_layers;  // per model chunk (pp × virtual stages)
  std::vector<std::string> notes;          // why it is not the stack's own, where it is not
  std::string tuned_note;  // of notes, the one naming the end switches of a tuned split
};

// The split simulate_training runs for `setup` on GPUs of `capacity_bytes` priced by `cm`:
// setup.strategy.chunk_layers where given; else with tune_split the least busy the stack's end
// switches give among those whose worst stage fits (the memory check simulate_training sets;
// where the stack's own does not fit, the least busy that does, even if busier), with the note
// naming the switches; else the stack's framework split, with a note naming a split of its end
// switches that fits where the framework's leaves a stage over memory; on a balanced stack the
// split by estimated time, or the even split where that one does not fit and the even one does.
// The times need `cm`'s GPU to have a peak for the job's dtype (has_peak_flops): without one
// (FP8 on an A100, which the trace builder refuses) a balanced stack's layers stay even, with a
// note, and a tuned one is the stack's own. A model without an architecture gets the framework
// split. What simulate_training runs and `memory` reports.
TrainingSplit training_split(const ModelSpec& model, const TrainingSetup& setup,
                             const ComputeModel& cm, double capacity_bytes);

}  // namespace meshsim
