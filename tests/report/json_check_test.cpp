#include "report/json_check.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace meshsim;

TEST_CASE("first_non_finite names the first NaN or infinity by its JSON path") {
  Json j = Json::parse(R"({"a": 1.5, "b": [0.0, 2.0, {"c": 3.0}], "d": "x", "e": null})");
  CHECK(first_non_finite(j).empty());  // null is not a number: only what dump() would null out
  j["b"][2]["c"] = std::numeric_limits<double>::infinity();
  CHECK(first_non_finite(j) == "/b/2/c");
  j["a"] = std::numeric_limits<double>::quiet_NaN();
  CHECK(first_non_finite(j) == "/a");  // object keys in order: a before b
  CHECK(first_non_finite(Json(-std::numeric_limits<double>::infinity())) == "/");
}
