#include "report/collective_report.hpp"

#include <doctest/doctest.h>

using namespace meshsim;

TEST_CASE("collective report: nccl-tests' columns, algbw and busbw from the time") {
  // 1 MB in 10 µs: algbw 100 GB/s; an all-reduce on 8 ranks moves 2·7/8 of it: busbw 175 GB/s.
  CollectiveSweep sweep{
      CollectiveOp::all_reduce, 8, "c", 16, {{1e6, 1e-5, "ring/LL128"}, {8, 0, "ring/LL"}}};
  CHECK(algbw_Bps(sweep.rows[0]) == doctest::Approx(100e9));
  CHECK(busbw_Bps(sweep, sweep.rows[0]) == doctest::Approx(175e9));
  CHECK(algbw_Bps(sweep.rows[1]) == 0);
  const auto text = collective_text(sweep);
  CHECK(text.find("# meshsim collective: all_reduce on 8 ranks of c (16 GPUs)\n") == 0);
  CHECK(text.find("         1000000       250000  float        10.00       100.00       175.00  "
                  "ring/LL128\n") != std::string::npos);
  CHECK(text.find("               8            2  float         0.00         0.00         0.00  "
                  "ring/LL\n") != std::string::npos);
  const auto j = collective_json(sweep);
  CHECK(j["op"] == "all_reduce");
  CHECK(j["ranks"] == 8);
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["busbw_Bps"].get<double>() == doctest::Approx(175e9));
  CHECK(j["rows"][0]["algo"] == "ring/LL128");
  // An all-gather's bus factor is (n−1)/n: 87.5 GB/s.
  sweep.op = CollectiveOp::all_gather;
  CHECK(busbw_Bps(sweep, sweep.rows[0]) == doctest::Approx(87.5e9));
}
