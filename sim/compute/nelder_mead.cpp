#include "compute/nelder_mead.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace meshsim {
namespace {

using Point = std::vector<double>;

Point combine(const Point& a, const Point& b, double t) {  // a + t·(b − a)
  Point r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = a[i] + t * (b[i] - a[i]);
  return r;
}

}  // namespace

Minimum nelder_mead(const std::function<double(const std::vector<double>&)>& objective, Point start,
                    Point step, int restarts, double tolerance, int max_evaluations) {
  // A NaN would break the ordering of the simplex: it counts as the worst possible value.
  const auto f = [&](const Point& x) {
    const double v = objective(x);
    return std::isnan(v) ? std::numeric_limits<double>::infinity() : v;
  };
  const std::size_t n = start.size();
  Minimum best{start, f(start), 1};
  for (int round = 0; round <= restarts; ++round) {
    std::vector<Point> simplex{best.x};
    for (std::size_t i = 0; i < n; ++i) {
      Point p = best.x;
      p[i] += step[i];
      simplex.push_back(p);
    }
    std::vector<double> value(simplex.size());
    for (std::size_t i = 0; i < simplex.size(); ++i) value[i] = f(simplex[i]);
    int evals = static_cast<int>(simplex.size());
    std::vector<std::size_t> order(simplex.size());
    while (evals < max_evaluations) {
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return value[a] < value[b]; });
      const std::size_t lo = order.front(), hi = order.back(), second = order[n - 1];
      if (std::abs(value[hi] - value[lo]) <= tolerance * (std::abs(value[lo]) + 1e-12)) break;
      Point centroid(n, 0.0);
      for (std::size_t i : order)
        if (i != hi)
          for (std::size_t j = 0; j < n; ++j) centroid[j] += simplex[i][j] / static_cast<double>(n);
      const Point reflected = combine(centroid, simplex[hi], -1.0);
      const double fr = f(reflected);
      ++evals;
      if (fr < value[lo]) {
        const Point expanded = combine(centroid, simplex[hi], -2.0);
        const double fe = f(expanded);
        ++evals;
        if (fe < fr) {
          simplex[hi] = expanded;
          value[hi] = fe;
        } else {
          simplex[hi] = reflected;
          value[hi] = fr;
        }
        continue;
      }
      if (fr < value[second]) {
        simplex[hi] = reflected;
        value[hi] = fr;
        continue;
      }
      const bool outside = fr < value[hi];
      const Point contracted = combine(centroid, outside ? reflected : simplex[hi], 0.5);
      const double fc = f(contracted);
      ++evals;
      if (fc < std::min(fr, value[hi])) {
        simplex[hi] = contracted;
        value[hi] = fc;
        continue;
      }
      for (std::size_t i = 0; i < simplex.size(); ++i) {  // shrink towards the best
        if (i == lo) continue;
        simplex[i] = combine(simplex[lo], simplex[i], 0.5);
        value[i] = f(simplex[i]);
        ++evals;
      }
    }
    const auto it = std::min_element(value.begin(), value.end());
    const auto i = static_cast<std::size_t>(it - value.begin());
    best.evaluations += evals;
    if (*it <= best.value) {
      best.x = simplex[i];
      best.value = *it;
    }
  }
  return best;
}

}  // namespace meshsim
