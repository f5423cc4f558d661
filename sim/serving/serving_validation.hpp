#pragma once
// Serving validation cases (validation/serving.json): each names a cluster, a model, a replica
// layout with its precision and batch limits, a traffic profile, and the published figures to
// compare (output tokens/s, TTFT and TPOT percentiles).
#include <string>
#include <vector>

#include "core/validation_row.hpp"

namespace meshsim {

// Runs every case of `path` (a validation/serving.json); file names in it resolve against
// `root` (the repository: topologies/, workloads/models/). `only`: run the cases whose name
// contains it.
std::vector<ValidationRow> run_serving_cases(const std::string& path, const std::string& root,
                                             const std::string& only = "");

}  // namespace meshsim
