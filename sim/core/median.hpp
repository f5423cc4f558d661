#pragma once
// The median of a sample (the mean of the two middle values for an even count; 0 when empty).
// Taken by value: the copy is sorted.
#include <algorithm>
#include <vector>

namespace meshsim {

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace meshsim
