// The training case reader of `validate` (validation/training.json) on malformed files.
#include "training/training_validation.hpp"

#include <doctest/doctest.h>

#include "case_mutants.hpp"
#include "core/json_reader.hpp"
#include "test_paths.hpp"

using namespace meshsim;

TEST_CASE("training validation cases: mutants of the case file run or fail with one Error line") {
  // The smallest case (4 DGX A100 nodes, data-parallel only), one to three structural mutations
  // of its fields each time; a mutant that still reads simulates its step.
  const Json all = load_json_file(test::source_path("validation/training.json"));
  Json base = all;
  base["cases"] = Json::array();
  for (const auto& c : all["cases"])
    if (c["name"] == "sc21-gpt-1.7b") base["cases"].push_back(c);
  REQUIRE(base["cases"].size() == 1);
  const auto outcome =
      test::run_case_mutants(base, 400, 31, "training", run_training_cases, "/cases/0");
  CHECK(outcome.errors > 200);
  CHECK(outcome.errors < 400);
  CHECK(outcome.multi_line_errors == 0);
}
