#include "compute/measured_points.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace meshsim {

MeasuredPoints::MeasuredPoints(std::vector<MeasuredPoint> points, double cell) : cell_(cell) {
  std::vector<std::uint64_t> k(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) k[i] = key(cell_of(points[i].coords));
  std::vector<std::size_t> order(points.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return k[a] < k[b]; });
  for (auto i : order) {
    points_.push_back(points[i]);
    keys_.push_back(k[i]);
  }
}

std::array<std::int32_t, 3> MeasuredPoints::cell_of(const std::array<double, 4>& q) const {
  std::array<std::int32_t, 3> c{};
  // Coordinates are log2 of shape sizes in [0, 63]: cells fit in 21 bits each with room.
  for (int i = 0; i < 3; ++i)
    c[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(
        std::floor(std::clamp(q[static_cast<std::size_t>(i)], -1e6, 1e6) / cell_));
  return c;
}

std::uint64_t MeasuredPoints::key(const std::array<std::int32_t, 3>& c) {
  constexpr std::int64_t offset = 1 << 20, mask = (1 << 21) - 1;
  std::uint64_t k = 0;
  for (auto v : c) k = (k << 21) | static_cast<std::uint64_t>((v + offset) & mask);
  return k;
}

std::pair<std::size_t, std::size_t> MeasuredPoints::run(std::uint64_t first,
                                                        std::uint64_t last) const {
  const auto lo = std::lower_bound(keys_.begin(), keys_.end(), first);
  const auto hi = std::upper_bound(lo, keys_.end(), last);
  return {static_cast<std::size_t>(lo - keys_.begin()),
          static_cast<std::size_t>(hi - keys_.begin())};
}

}  // namespace meshsim
