#include <cmath>
#include <stdexcept>

#include "commands.hpp"

namespace meshsim::cli {
namespace {

// The JSON path of the first non-finite number, or "" when there is none.
std::string non_finite_at(const Json& j, const std::string& path) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) return path.empty() ? "/" : path;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      if (auto p = non_finite_at(it.value(), path + "/" + it.key()); !p.empty()) return p;
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i)
      if (auto p = non_finite_at(j[i], path + "/" + std::to_string(i)); !p.empty()) return p;
  return "";
}

}  // namespace

std::string json_text(const Json& j) {
  if (const auto at = non_finite_at(j, ""); !at.empty())
    throw std::logic_error("a non-finite number at " + at +
                           " would print as null; please report the command and its inputs");
  return j.dump(2);
}

}  // namespace meshsim::cli
