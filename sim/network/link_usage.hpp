#pragma once
// Building the weighted link sets flows use, from router paths.
#include <vector>

#include "network/max_min_fair.hpp"
#include "topology/router.hpp"

namespace meshsim {

// Accumulates usage into a dense per-link array, for flows built from thousands of hops (a
// 512-rank ring channel): adding is O(1) per link. Links come out in first-use order, which is
// deterministic for deterministic input; the solver needs each link once, not sorted.
class UsageBuilder {
 public:
  explicit UsageBuilder(std::size_t link_count) : weight_(link_count, 0.0) {}
  // Every link of `paths`, each with weight × its path's fraction.
  void add(const std::vector<Path>& paths, double weight = 1.0);
  void add(std::uint32_t link, double weight);
  FlowLinks take();  // each link once, in first-use order; leaves the builder empty

 private:
  std::vector<double> weight_;
  std::vector<std::uint32_t> touched_;
};

// The usage of one point-to-point transfer over `paths` (striped paths add up by fraction).
FlowLinks usage_of(const std::vector<Path>& paths);

}  // namespace meshsim
