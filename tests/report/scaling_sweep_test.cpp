#include "report/scaling_sweep.hpp"

#include <doctest/doctest.h>

using namespace meshsim;

TEST_CASE("scaling sweep: efficiency against the first size that fits, strong and weak") {
  // Strong: twice the GPUs, 1.8× the tokens/s → 90 %. Weak: tokens/s per GPU 900 against 1000.
  CHECK(scaling_efficiency(false, 180, 16, 100, 8) == doctest::Approx(0.9));
  CHECK(scaling_efficiency(true, 14400, 16, 8000, 8) == doctest::Approx(0.9));

  ScalingSweep sweep{true, "m", 1, {}};
  CHECK(efficiency_reference(sweep) == nullptr);
  CHECK(sweep_footer_text(sweep) == "# no layout fits at any size\n");
  sweep.points.push_back({1, 8, 64, {}});
  sweep.points.push_back({2, 16, 128, SweepBest{12300, 0.349, 1.0, "tp=8 pp=2"}});
  sweep.points.push_back({4, 32, 256, SweepBest{22140, 0.31, 0.9, "tp=8 pp=4"}});
  REQUIRE(efficiency_reference(sweep) == &sweep.points[1]);
  CHECK(sweep_header_text(sweep).find("# meshsim search sweep (weak scaling): m; reference point 1 "
                                      "nodes;") == 0);
  CHECK(sweep_row_text(sweep.points[0]) == "     1       8       64  no candidate fits\n");
  CHECK(sweep_row_text(sweep.points[2]) ==
        "     4      32      256        22140      31.0%       90.0%  tp=8 pp=4\n");
  // The batch grew from the first size, but efficiency is against the second: the text says so.
  CHECK(sweep_footer_text(sweep) ==
        "# efficiency is against 2 nodes, the first size where a layout fits\n");
  const auto j = sweep_json(sweep);
  CHECK(j["scaling"] == "weak");
  CHECK(j["reference_nodes"] == 1);
  CHECK(j["efficiency_reference_nodes"] == 2);
  CHECK(j["points"][0]["best"].is_null());
  CHECK_FALSE(j["points"][0].contains("mfu"));
  CHECK(j["points"][2]["efficiency"] == 0.9);
  CHECK(j["points"][2]["best"] == "tp=8 pp=4");
  // A sweep whose first size fits needs no footer.
  sweep.points.erase(sweep.points.begin());
  sweep.first_nodes = 2;
  CHECK(sweep_footer_text(sweep).empty());
}
