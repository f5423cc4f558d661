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

}  // namespace meshsim
