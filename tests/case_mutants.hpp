#pragma once
// Mutants of a `validate --cases` file (collectives, seed checks, training, serving), run as
// `validate` runs them: a file a user points `--cases` at is input like any other, so each
// mutant must either run to rows with finite, non-negative simulated figures against positive
// published ones, or stop at one meshsim::Error line. The mutations fall within `at` (by default
// the file's `cases`: its description is one string the reader only checks for).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/validation_row.hpp"
#include "json_mutation.hpp"
#include "test_paths.hpp"

namespace meshsim::test {

using CaseRunner = std::vector<ValidationRow> (*)(const std::string& path, const std::string& root,
                                                  const std::string& only);

inline MutantOutcome run_case_mutants(const Json& base, int count, std::uint64_t seed,
                                      const std::string& name, CaseRunner run,
                                      const std::string& at = "/cases") {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("meshsim-" + name + "-mutant-" + std::to_string(::getpid()) + ".json"))
                        .string();
  const auto outcome = run_mutants(
      base, count, seed, path,
      [&](const std::string& p) {
        for (const auto& r : run(p, source_path(""), "")) {
          CAPTURE(r.name);
          CHECK(std::isfinite(r.simulated));
          CHECK(r.simulated >= 0);
          CHECK(r.measured > 0);
        }
      },
      Json::json_pointer(at), /*typed=*/true);
  std::filesystem::remove(path);
  return outcome;
}

}  // namespace meshsim::test
