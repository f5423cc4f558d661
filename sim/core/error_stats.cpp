#include "core/error_stats.hpp"

#include <algorithm>
#include <cmath>

namespace meshsim {

ErrorStats error_stats(std::vector<double> e) {
  ErrorStats s;
  s.count = e.size();
  if (e.empty()) return s;
  for (double& x : e) x = std::abs(x);
  std::sort(e.begin(), e.end());
  const auto at = [&](double q) {
    const double pos = q * static_cast<double>(e.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, e.size() - 1);
    return e[lo] + (pos - static_cast<double>(lo)) * (e[hi] - e[lo]);
  };
  s.median = at(0.5);
  s.p95 = at(0.95);
  s.max = e.back();
  return s;
}

}  // namespace meshsim
