#pragma once
// The seed guide's figures (DESIGN.md "Seed checks"; validation/seed_checks.json) through the
// memory model: BF16 weights and model state of a 70B model under DDP and ZeRO-1/2/3 over 64
// GPUs, Llama 3.1 70B's KV cache per token and per 32K sequence. Each must hold to the seed's
// rounding: |simulated − seed| ≤ half a unit of the seed's last digit (the row's tolerance).
#include <string>
#include <vector>

#include "core/validation_row.hpp"

namespace meshsim {

std::vector<ValidationRow> run_seed_checks(const std::string& path, const std::string& root,
                                           const std::string& only = "");

}  // namespace meshsim
