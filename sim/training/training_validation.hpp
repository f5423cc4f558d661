#pragma once
// Training cases (validation/training.json): published achieved TFLOP/s per GPU against the
// simulated step of the same configuration. Megatron-LM counts recomputed FLOPs when it
// recomputes, so full-recompute rows compare with HFU, others with MFU.
#include <string>
#include <vector>

#include "core/validation_row.hpp"

namespace meshsim {

std::vector<ValidationRow> run_training_cases(const std::string& path, const std::string& root,
                                              const std::string& only = "");

// Stack deltas (validation/stack_deltas.json): a published end-to-end speedup of one software
// setting over another on the same job (torch.compile over eager, async TP over none), against
// the ratio of the two simulated steps. A ratio leaves out what both sides share (the GPU's
// clocks and power cap, the batch the source did not state), so it checks the stack model
// where an absolute row would mostly check the hardware.
std::vector<ValidationRow> run_stack_delta_cases(const std::string& path, const std::string& root,
                                                 const std::string& only = "");
// Reads a stack-delta file strictly without running it (the number of cases; an Error naming
// the file and JSON path on bad input): what `run_stack_delta_cases` checks before it runs.
std::size_t read_stack_delta_file(const std::string& path);

}  // namespace meshsim
