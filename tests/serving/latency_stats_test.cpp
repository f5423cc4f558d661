#include "serving/latency_stats.hpp"

#include <doctest/doctest.h>

#include "core/rng.hpp"

namespace meshsim::test {

TEST_CASE("percentiles interpolate between closest ranks") {
  // Positions q·(n − 1) over {1, 2, 3, 4}: p50 at 1.5 → 2.5; p90 at 2.7 → 3.7; p99 at 2.97.
  const auto s = summarize({4, 1, 3, 2});
  CHECK(s.count == 4);
  CHECK(s.mean == doctest::Approx(2.5));
  CHECK(s.p50 == doctest::Approx(2.5));
  CHECK(s.p90 == doctest::Approx(3.7));
  CHECK(s.p99 == doctest::Approx(3.97));
  CHECK(summarize({}).p99 == 0);
  CHECK(summarize({7}).p90 == 7);
}

TEST_CASE("the log histogram's percentiles are within its bucket width") {
  LogHistogram h;
  std::vector<double> v;
  Rng rng(3);
  for (int i = 0; i < 20000; ++i) {
    const double x = 1e-3 * (1 + 100 * rng.uniform01());
    h.add(x);
    v.push_back(x);
  }
  const auto exact = summarize(v);
  const auto approx = h.summary();
  CHECK(approx.mean == doctest::Approx(exact.mean).epsilon(1e-12));
  CHECK(approx.p50 == doctest::Approx(exact.p50).epsilon(1.5e-3));
  CHECK(approx.p90 == doctest::Approx(exact.p90).epsilon(1.5e-3));
  CHECK(approx.p99 == doctest::Approx(exact.p99).epsilon(1.5e-3));
  LogHistogram z;
  z.add(0);
  CHECK(z.percentile(0.5) == 0);
}

TEST_CASE("the log histogram's CDF: one point per bucket reached, at its cumulative share") {
  LogHistogram h;
  for (double ms : {1.0, 2.0, 3.0, 4.0}) h.add(ms * 1e-3);
  // Four samples in four buckets, four fractions asked for: (≈1 ms, 0.25) … (≈4 ms, 1).
  const auto c = h.cdf(4);
  REQUIRE(c.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(c[i].first == doctest::Approx(1e-3 * static_cast<double>(i + 1)).epsilon(1e-3));
    CHECK(c[i].second == doctest::Approx(0.25 * static_cast<double>(i + 1)));
  }
  // Two fractions: the 1 ms bucket reaches neither 0.5 nor 1; the 2 ms one reaches 0.5.
  const auto two = h.cdf(2);
  REQUIRE(two.size() == 2);
  CHECK(two[0].second == doctest::Approx(0.5));
  CHECK(two[1].second == doctest::Approx(1.0));
  CHECK(two[1].first == doctest::Approx(4e-3).epsilon(1e-3));
  CHECK(LogHistogram().cdf(10).empty());
}

}  // namespace meshsim::test
