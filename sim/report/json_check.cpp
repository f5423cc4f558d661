#include "report/json_check.hpp"

#include <cmath>

namespace meshsim {
namespace {

std::string first_at(const Json& j, const std::string& path) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) return path.empty() ? "/" : path;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      if (auto p = first_at(it.value(), path + "/" + it.key()); !p.empty()) return p;
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i)
      if (auto p = first_at(j[i], path + "/" + std::to_string(i)); !p.empty()) return p;
  return "";
}

}  // namespace

std::string first_non_finite(const Json& j) {
  return first_at(j, "");
}

}  // namespace meshsim
