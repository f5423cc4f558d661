#pragma once
// Collective cases (validation/collectives.json): published nccl-tests busbw against
// `meshsim collective`'s price for the same op, ranks, size and algorithm.
#include <string>
#include <vector>

#include "core/validation_row.hpp"

namespace meshsim {

// Files in the case file resolve against `root` (topologies/); `only` keeps the cases whose name
// contains it.
std::vector<ValidationRow> run_collective_cases(const std::string& path, const std::string& root,
                                                const std::string& only = "");

}  // namespace meshsim
