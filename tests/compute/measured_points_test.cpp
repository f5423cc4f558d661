#include "compute/measured_points.hpp"

#include <doctest/doctest.h>

#include <set>

#include "core/rng.hpp"

using namespace meshsim;

TEST_CASE("measured points: a query visits every point within one cell edge") {
  // 2000 points uniform in [0, 16)^4; against a brute-force scan, the grid must visit every
  // point within distance 1.5 of each of 200 queries (it may visit more: whole cells).
  Rng rng(7);
  const auto u = [&] { return 16.0 * rng.uniform01(); };
  std::vector<MeasuredPoint> pts;
  for (int i = 0; i < 2000; ++i) pts.push_back({{u(), u(), u(), u()}, static_cast<double>(i), 0});
  const MeasuredPoints index(pts, 1.5);
  CHECK(index.size() == 2000);
  std::size_t visited_total = 0;
  for (int q = 0; q < 200; ++q) {
    const std::array<double, 4> x{u(), u(), u(), u()};
    std::set<int> visited;
    index.near(x,
               [&](const MeasuredPoint& p) { visited.insert(static_cast<int>(p.log_correction)); });
    visited_total += visited.size();
    for (const auto& p : pts) {
      double d2 = 0;
      for (int i = 0; i < 3; ++i) d2 += (p.coords[i] - x[i]) * (p.coords[i] - x[i]);
      if (d2 < 1.5 * 1.5) CHECK(visited.contains(static_cast<int>(p.log_correction)));
    }
  }
  // The grid visits 27 cells of 1.5³ out of 16³: far fewer than all 2000 points a query.
  CHECK(visited_total < 200 * 2000 / 4);
  const MeasuredPoints none;
  CHECK(none.empty());
}
