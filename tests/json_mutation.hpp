#pragma once
// Mutation of JSON documents for the loaders' fuzz tests: structural (`mutate`: replace, remove
// or add one value somewhere in a document, with values chosen to hit edge cases: null, zero,
// negative, huge, wrong type) and typed (`mutate_typed`: one leaf becomes an edge value of its own
// type), and a runner for mutants of a file (`run_mutants`).
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.hpp"
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

// Replaces one leaf (a number, string or boolean) somewhere in the document by another of the
// same type at an edge: the mutant stays well-typed, so it gets past the type checks to the range
// and consistency checks, and past those into what runs. Containers and nulls are left alone.
inline void mutate_typed(Json& j, Rng& rng) {
  Json* at = &j;
  while ((at->is_object() || at->is_array()) && !at->empty()) {
    auto it = at->begin();
    std::advance(it, static_cast<long>(rng.below(at->size())));
    at = &*it;
  }
  if (at->is_number_integer()) {
    static constexpr std::int64_t kInts[] = {0, -1, 1, 2, 3, 7, 64, 4096};
    *at = kInts[rng.below(std::size(kInts))];
  } else if (at->is_number()) {
    static constexpr double kReals[] = {0.0, -1.0, 1e-300, 0.5, 1.0, 2.0, 1e300, 1e9};
    *at = kReals[rng.below(std::size(kReals))];
  } else if (at->is_string()) {
    const std::string s = at->get<std::string>();
    const std::string kStrings[] = {
        "", "gpu", s + "x", "0", "inf", "tp=1", s.substr(0, s.size() / 2)};
    *at = kStrings[rng.below(std::size(kStrings))];
  } else if (at->is_boolean()) {
    *at = !at->get<bool>();
  }
}

// What mutants of a case file did: how many a loader refused with a meshsim::Error, and how many
// of those errors ran past one line (the CLI prints an Error as one `error:` line).
struct MutantOutcome {
  int errors = 0, multi_line_errors = 0;
};

// Writes `count` mutants of `base` to `path` (one to three mutations each, within the part `at`
// points to; with `typed`, every other mutant keeps its types) and hands each to `load`, which
// reads (and runs) the file as its command does: it may succeed or throw an Error; any other
// exception, a crash or a sanitizer report fails the test that called it.
template <class Load>
MutantOutcome run_mutants(const Json& base, int count, std::uint64_t seed, const std::string& path,
                          Load&& load, const Json::json_pointer& at = Json::json_pointer(""),
                          bool typed = false) {
  Rng rng(seed);
  MutantOutcome out;
  for (int i = 0; i < count; ++i) {
    Json doc = base;
    for (std::uint64_t k = 0, m = 1 + rng.below(3); k < m; ++k)
      if (typed && i % 2 == 0)
        mutate_typed(doc[at], rng);
      else
        mutate(doc[at], rng);
    std::ofstream(path, std::ios::trunc) << doc.dump();
    try {
      load(path);
    } catch (const Error& e) {
      ++out.errors;
      if (std::string(e.what()).find('\n') != std::string::npos) ++out.multi_line_errors;
    }
  }
  return out;
}

}  // namespace meshsim::test
