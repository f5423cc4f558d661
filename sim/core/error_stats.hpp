#pragma once
// Summary of relative errors (predicted / measured − 1) for the accuracy tables: how many, and
// the median, 95th percentile (linear between order statistics) and maximum of |error|.
#include <cstddef>
#include <vector>

namespace meshsim {

struct ErrorStats {
  std::size_t count = 0;
  double median = 0, p95 = 0, max = 0;  // of |relative error|
};
ErrorStats error_stats(std::vector<double> relative_errors);

}  // namespace meshsim
