#pragma once
// JSON equality with a relative tolerance on numbers: unit conversions on the way in and out
// (µs ↔ s, GB/s ↔ B/s) may move the last bit, and golden outputs should not break on that.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace meshsim::test {

// The JSON path of the first difference ("" when `a` and `b` agree within `rel`).
inline std::string json_diff(const nlohmann::json& a, const nlohmann::json& b, double rel = 1e-12,
                             const std::string& path = "") {
  const std::string here = path.empty() ? "/" : path;
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    if (std::abs(x - y) <= rel * std::max(std::abs(x), std::abs(y))) return "";
    return here + ": " + a.dump() + " vs " + b.dump();
  }
  if (a.type() != b.type()) return here + ": type differs";
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return path + "/" + it.key() + ": missing";
      if (auto d = json_diff(it.value(), b[it.key()], rel, path + "/" + it.key()); !d.empty())
        return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) return path + "/" + it.key() + ": unexpected";
    return "";
  }
  if (a.is_array()) {
    if (a.size() != b.size())
      return here + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
             " elements";
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = json_diff(a[i], b[i], rel, path + "/" + std::to_string(i)); !d.empty()) return d;
    return "";
  }
  return a == b ? "" : here + ": " + a.dump() + " vs " + b.dump();
}

inline bool json_near(const nlohmann::json& a, const nlohmann::json& b, double rel = 1e-12) {
  return json_diff(a, b, rel).empty();
}

}  // namespace meshsim::test
