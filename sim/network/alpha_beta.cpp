#include "network/alpha_beta.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace meshsim {

AlphaBetaRegime fit_alpha_beta(std::span<const AlphaBetaPoint> points) {
  std::vector<AlphaBetaPoint> use;
  for (const auto& p : points)
    if (p.bytes > 0 && p.seconds > 0) use.push_back(p);
  if (use.empty()) throw std::invalid_argument("α-β fit needs a point with bytes > 0");
  AlphaBetaRegime r;
  r.points = static_cast<int>(use.size());
  const auto n = static_cast<Eigen::Index>(use.size());
  // Rows (1/t, S/t) · (α, 1/β) = 1: the relative residual is linear in (α, 1/β).
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& p = use[static_cast<std::size_t>(i)];
    a(i, 0) = 1.0 / p.seconds;
    a(i, 1) = p.bytes / p.seconds;
  }
  double alpha = 0, inv_beta = 0;
  if (n >= 2) {
    const Eigen::Vector2d x = a.colPivHouseholderQr().solve(b);
    alpha = x(0);
    inv_beta = x(1);
  }
  if (n < 2 || alpha < 0 || !(inv_beta > 0)) {
    // Through the origin: minimise Σ (γ·S/t − 1)² → γ = Σ(S/t) / Σ(S/t)².
    const Eigen::VectorXd s = a.col(1);
    alpha = 0;
    inv_beta = s.sum() / s.squaredNorm();
  }
  r.alpha_s = alpha;
  r.bandwidth_Bps = 1.0 / inv_beta;
  for (const auto& p : use)
    r.max_relative_error =
        std::max(r.max_relative_error, std::abs(r.seconds(p.bytes) - p.seconds) / p.seconds);
  return r;
}

std::vector<double> default_regime_edges() {
  return {64.0 * 1024, 8.0 * 1024 * 1024};
}

std::vector<AlphaBetaRegime> fit_regimes(std::vector<AlphaBetaPoint> points,
                                         const std::vector<double>& edges) {
  std::erase_if(points, [](const AlphaBetaPoint& p) { return !(p.bytes > 0 && p.seconds > 0); });
  if (points.empty()) throw std::invalid_argument("α-β fit needs a point with bytes > 0");
  std::sort(points.begin(), points.end(),
            [](const auto& x, const auto& y) { return x.bytes < y.bytes; });
  // Buckets by the edges; a bucket with fewer than two points joins the next (the last joins
  // the previous), so every regime has a fit of its own.
  std::vector<double> lo{0};
  for (double e : edges) lo.push_back(e);
  std::vector<std::vector<AlphaBetaPoint>> buckets(lo.size());
  for (const auto& p : points) {
    std::size_t k = lo.size() - 1;
    while (k > 0 && p.bytes < lo[k]) --k;
    buckets[k].push_back(p);
  }
  std::vector<std::pair<double, std::vector<AlphaBetaPoint>>> merged;
  std::vector<AlphaBetaPoint> carry;
  double carry_lo = 0;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    if (carry.empty()) carry_lo = lo[k];
    carry.insert(carry.end(), buckets[k].begin(), buckets[k].end());
    if (carry.size() >= 2) {
      merged.emplace_back(carry_lo, std::move(carry));
      carry.clear();
    }
  }
  if (!carry.empty()) {
    if (merged.empty())
      merged.emplace_back(carry_lo, std::move(carry));
    else
      merged.back().second.insert(merged.back().second.end(), carry.begin(), carry.end());
  }
  std::vector<AlphaBetaRegime> out;
  for (std::size_t i = 0; i < merged.size(); ++i) {
    auto r = fit_alpha_beta(merged[i].second);
    r.min_bytes = i == 0 ? 0 : merged[i].first;
    r.max_bytes =
        i + 1 < merged.size() ? merged[i + 1].first : std::numeric_limits<double>::infinity();
    out.push_back(r);
  }
  return out;
}

double regime_seconds(const std::vector<AlphaBetaRegime>& regimes, double bytes) {
  if (regimes.empty()) return 0;
  for (const auto& r : regimes)
    if (bytes < r.max_bytes) return r.seconds(bytes);
  return regimes.back().seconds(bytes);
}

}  // namespace meshsim
