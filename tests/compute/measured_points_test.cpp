#include "compute/measured_points.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <vector>

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

TEST_CASE("measured points: the 27 cells' points in key order, as given within a cell") {
  // The order of the correction's floating-point sums: the three cells along the last coordinate
  // are one run of the sorted points, which must be the same points in the same order as the
  // cells one by one (dc = -1, 0, 1 inside db inside da).
  Rng rng(9);
  const auto u = [&] { return 6.0 * rng.uniform01(); };
  std::vector<MeasuredPoint> pts;
  for (int i = 0; i < 600; ++i) pts.push_back({{u(), u(), u(), u()}, static_cast<double>(i), 0});
  const MeasuredPoints index(pts, 1.0);
  const auto cell = [](double x) { return static_cast<int>(std::floor(x)); };
  for (int q = 0; q < 100; ++q) {
    const std::array<double, 4> x{u(), u(), u(), u()};
    std::vector<int> got, expected;
    index.near(x,
               [&](const MeasuredPoint& p) { got.push_back(static_cast<int>(p.log_correction)); });
    for (int da = -1; da <= 1; ++da)
      for (int db = -1; db <= 1; ++db)
        for (int dc = -1; dc <= 1; ++dc)
          for (const auto& p : pts)
            if (cell(p.coords[0]) == cell(x[0]) + da && cell(p.coords[1]) == cell(x[1]) + db &&
                cell(p.coords[2]) == cell(x[2]) + dc)
              expected.push_back(static_cast<int>(p.log_correction));
    CHECK(got == expected);
  }
}

TEST_CASE("measured points: cells at the edge of the key's range are still visited") {
  // With 0.5-wide cells a last coordinate of 524,287.75 is cell 2^20 − 1, the top of its 21-bit
  // key field: the next cell's key wraps, so the query looks the three cells up one by one.
  const std::vector<MeasuredPoint> pts{{{0, 0, 524287.75, 0}, 1, 0}, {{0, 0, 524287.25, 0}, 2, 0}};
  const MeasuredPoints index(pts, 0.5);
  std::vector<int> got;
  index.near({0, 0, 524287.75, 0},
             [&](const MeasuredPoint& p) { got.push_back(static_cast<int>(p.log_correction)); });
  CHECK(got == std::vector<int>{2, 1});
}
