#pragma once
// Measured shapes of a calibration profile, indexed for the compute model's local correction:
// points in log2-shape space (4 coordinates), bucketed on a grid over the first three whose
// cell edge is the correction radius, so a query visits only the 27 cells around it instead of
// every point (a harness run or a converted published profile holds thousands of shapes).
#include <array>
#include <cstdint>
#include <vector>

namespace meshsim {

struct MeasuredPoint {
  std::array<double, 4> coords{};
  double log_correction = 0;
  std::uint8_t tag = 0;  // which kernels the point may correct (dtype class, direction)
};

class MeasuredPoints {
 public:
  MeasuredPoints() = default;
  MeasuredPoints(std::vector<MeasuredPoint> points, double cell);

  bool empty() const { return points_.empty(); }
  std::size_t size() const { return points_.size(); }

  // Calls visit(point) for every point in the cells around `q` (a superset of those within one
  // cell edge of it), in a fixed order: by cell key, and within a cell as the points were given.
  template <class Visit>
  void near(const std::array<double, 4>& q, Visit&& visit) const {
    const auto c = cell_of(q);
    const auto visit_run = [&](std::uint64_t first, std::uint64_t last) {
      const auto [begin, end] = run(first, last);
      for (auto i = begin; i < end; ++i) visit(points_[i]);
    };
    for (int da = -1; da <= 1; ++da)
      for (int db = -1; db <= 1; ++db) {
        // The three cells along the last coordinate have consecutive keys, so their points are
        // one run of the sorted points: one search for the run instead of one per cell (the
        // same points in the same order), unless the last field would wrap.
        const auto first = key({c[0] + da, c[1] + db, c[2] - 1});
        const auto last = key({c[0] + da, c[1] + db, c[2] + 1});
        if (last == first + 2) {
          visit_run(first, last);
        } else {
          for (int dc = -1; dc <= 1; ++dc) {
            const auto k = key({c[0] + da, c[1] + db, c[2] + dc});
            visit_run(k, k);
          }
        }
      }
  }

 private:
  std::array<std::int32_t, 3> cell_of(const std::array<double, 4>& q) const;
  static std::uint64_t key(const std::array<std::int32_t, 3>& cell);
  // The points whose keys are in [first, last].
  std::pair<std::size_t, std::size_t> run(std::uint64_t first, std::uint64_t last) const;

  double cell_ = 1;
  std::vector<MeasuredPoint> points_;  // sorted by cell key
  std::vector<std::uint64_t> keys_;    // one per point, sorted
};

}  // namespace meshsim
