#pragma once
// JSON equality with a relative tolerance on numbers: unit conversions on the way in and out
// (µs ↔ s, GB/s ↔ B/s) may move the last bit.
#include <cmath>
#include <nlohmann/json.hpp>

namespace meshsim::test {

inline bool json_near(const nlohmann::json& a, const nlohmann::json& b, double rel = 1e-12) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= rel * std::max(std::abs(x), std::abs(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !json_near(it.value(), b[it.key()], rel)) return false;
    return true;
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!json_near(a[i], b[i], rel)) return false;
    return true;
  }
  return a == b;
}

}  // namespace meshsim::test
