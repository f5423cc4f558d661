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
  UsageBuilder() = default;
  explicit UsageBuilder(std::size_t link_count) : weight_(link_count, 0.0) {}
  // Empties the builder and makes room for `link_count` links. The array is kept between uses,
  // so a builder reused for many plans zeroes only the links it touched, not the whole fabric
  // (11 MB per plan at 100,000 GPUs).
  void reset(std::size_t link_count);
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

// This thread's builder, emptied and sized for `link_count` links: for planners that build one
// flow set at a time and do not nest.
UsageBuilder& scratch_usage_builder(std::size_t link_count);

}  // namespace meshsim
