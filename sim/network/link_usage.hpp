#pragma once
// Building the weighted link sets flows use, from router paths.
#include <vector>

#include "network/max_min_fair.hpp"
#include "topology/router.hpp"

namespace meshsim {

// Adds every link of `paths`, each with weight × its path's fraction.
void add_usage(FlowLinks& usage, const std::vector<Path>& paths, double weight = 1.0);
// Sorts by link and merges repeats, as the solver expects.
void normalize(FlowLinks& usage);
FlowLinks usage_of(const std::vector<Path>& paths);

}  // namespace meshsim
