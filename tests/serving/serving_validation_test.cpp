// The serving case reader of `validate` (validation/serving.json) on malformed files.
#include "serving/serving_validation.hpp"

#include <doctest/doctest.h>

#include "case_mutants.hpp"
#include "core/json_reader.hpp"
#include "test_paths.hpp"

using namespace meshsim;

TEST_CASE("serving validation cases: mutants of the case file run or fail with one Error line") {
  // The MLPerf server case (latency metrics as well as throughput) cut to 64 requests on one
  // replica (the full run takes seconds), one to three structural mutations of its fields each
  // time; a mutant that still reads is served.
  Json base = load_json_file(test::source_path("validation/serving.json"));
  REQUIRE(base["cases"].size() == 2);
  base["cases"].erase(0);
  auto& c = base["cases"][0];
  REQUIRE(c["name"] == "mlperf-v4.1-llama2-70b-server");
  c["replicas"] = 1;
  c["traffic"]["requests"] = 64;
  const auto outcome =
      test::run_case_mutants(base, 300, 41, "serving", run_serving_cases, "/cases/0");
  CHECK(outcome.errors > 150);
  CHECK(outcome.errors < 300);
  CHECK(outcome.multi_line_errors == 0);
}
