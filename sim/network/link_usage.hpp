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

// Accumulates usage into a dense per-link array, for flows built from thousands of hops (a
// 512-rank ring channel): adding is O(1) per link. Links come out in first-use order, which is
// deterministic for deterministic input; the solver needs each link once, not sorted.
class UsageBuilder {
 public:
  explicit UsageBuilder(std::size_t link_count) : weight_(link_count, 0.0) {}
  void add(const std::vector<Path>& paths, double weight = 1.0);
  FlowLinks take();  // each link once, in first-use order; leaves the builder empty

 private:
  std::vector<double> weight_;
  std::vector<std::uint32_t> touched_;
};

}  // namespace meshsim
