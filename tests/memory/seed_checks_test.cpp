// The seed-check reader of `validate` (validation/seed_checks.json) on malformed files.
#include "memory/seed_checks.hpp"

#include <doctest/doctest.h>

#include "case_mutants.hpp"
#include "core/json_reader.hpp"
#include "test_paths.hpp"

using namespace meshsim;

TEST_CASE("seed checks: mutants of the case file run or fail with one Error line") {
  const Json base = load_json_file(test::source_path("validation/seed_checks.json"));
  REQUIRE(base["cases"].size() == 7);
  const auto outcome = test::run_case_mutants(base, 1000, 51, "seed-checks", run_seed_checks);
  CHECK(outcome.errors > 500);
  CHECK(outcome.errors < 1000);
  CHECK(outcome.multi_line_errors == 0);
}
