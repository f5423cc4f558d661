#pragma once
// Structural mutation of JSON documents for the loaders' fuzz tests: replace, remove or add one
// value somewhere in a document, with values chosen to hit edge cases (null, zero, negative,
// huge, wrong type).
#include <iterator>

#include "core/json_reader.hpp"
#include "core/rng.hpp"

namespace meshsim::test {

inline Json random_value(Rng& rng) {
  switch (rng.below(10)) {
    case 0:
      return nullptr;
    case 1:
      return rng.below(2) == 0;
    case 2:
      return 0;
    case 3:
      return -1;
    case 4:
      return 1e300;
    case 5:
      return static_cast<std::int64_t>(rng.below(5));
    case 6:
      return "gpu";
    case 7:
      return Json::array();
    case 8:
      return Json::object();
    default:
      return 0.5;
  }
}

// Replaces, removes or adds one thing somewhere in the document.
inline void mutate(Json& j, Rng& rng) {
  Json* at = &j;
  for (int depth = 0; depth < 8; ++depth) {
    if (!(at->is_object() || at->is_array()) || at->empty() || rng.below(4) == 0) break;
    auto it = at->begin();
    std::advance(it, static_cast<long>(rng.below(at->size())));
    if (!(it->is_object() || it->is_array()) || rng.below(3) == 0) {
      switch (rng.below(3)) {
        case 0:
          *it = random_value(rng);
          return;
        case 1:
          if (at->is_object()) {
            at->erase(it.key());
            return;
          }
          *it = random_value(rng);
          return;
        default:
          if (at->is_object())
            (*at)["fuzz_key"] = random_value(rng);
          else
            at->push_back(random_value(rng));
          return;
      }
    }
    at = &*it;
  }
  *at = random_value(rng);
}

}  // namespace meshsim::test
