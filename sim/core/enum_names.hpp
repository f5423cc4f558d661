#pragma once
// Parsing an enum from its name, for enums that list their values in an array and have a
// name_of() overload: one loop instead of one per enum.
#include <optional>
#include <string>
#include <string_view>

namespace meshsim {

template <class E, class Range>
std::optional<E> parse_by_name(const Range& all, std::string_view s) {
  for (E e : all)
    if (name_of(e) == s) return e;
  return std::nullopt;
}

// "a, b, c" (or with another separator) of every name, for error messages.
template <class Range>
std::string joined_names(const Range& all, std::string_view separator = ", ") {
  std::string out;
  for (auto e : all) {
    if (!out.empty()) out += separator;
    out += name_of(e);
  }
  return out;
}

}  // namespace meshsim
