#include "report/validation_report.hpp"

#include <doctest/doctest.h>

using namespace meshsim;

namespace {

ValidationRow row(const char* group, const char* name, double measured, double simulated,
                  double tolerance = 0, const char* gap = "") {
  ValidationRow r;
  r.group = group;
  r.name = name;
  r.metric = "busbw";
  r.unit = "GB/s";
  r.measured = measured;
  r.simulated = simulated;
  r.tolerance = tolerance;
  r.known_gap = gap;
  return r;
}

}  // namespace

TEST_CASE("validation report: MAPE per group, tolerance and known-gap marks") {
  // Group a: +10 % and −30 % → MAPE 20 %; group b: +5 % → 5 %.
  const std::vector<ValidationRow> rows = {row("b", "b1", 100, 105, 0.02),
                                           row("a", "a1", 100, 110, 0.2),
                                           row("a", "a2", 100, 70, 0, "not modelled")};
  const auto mape = mape_by_group(rows);
  REQUIRE(mape.size() == 2);
  CHECK(mape.at("a").cases == 2);
  CHECK(mape.at("a").mape == doctest::Approx(0.2));
  CHECK(mape.at("b").mape == doctest::Approx(0.05));
  CHECK(outside_tolerance(rows[0]));        // 5 % against 2 %
  CHECK_FALSE(outside_tolerance(rows[1]));  // 10 % against 20 %
  CHECK_FALSE(outside_tolerance(rows[2]));  // no tolerance of its own
  const auto text = validation_text(rows, "cases/");
  CHECK(text.find("# meshsim validate: 3 comparisons from cases/ (nothing fitted to them)\n") == 0);
  CHECK(text.find("+5.0%  outside tolerance\n") != std::string::npos);
  CHECK(text.find("-30.0%  known gap\n") != std::string::npos);
  CHECK(text.find("+10.0%\n") != std::string::npos);
  // Groups in name order, whatever the order of the rows.
  CHECK(text.find("a                             2    20.0%\nb                             1     "
                  "5.0%\n") != std::string::npos);
  const auto j = validation_json(rows);
  REQUIRE(j["cases"].size() == 3);
  CHECK(j["cases"][0]["within_tolerance"] == false);
  CHECK(j["cases"][1]["within_tolerance"] == true);
  CHECK_FALSE(j["cases"][2].contains("tolerance"));
  CHECK(j["cases"][2]["known_gap"] == "not modelled");
  CHECK(j["mape"]["a"].get<double>() == doctest::Approx(0.2));
}
