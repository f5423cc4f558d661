#include "serving/latency_stats.hpp"

#include <algorithm>
#include <cmath>

namespace meshsim {
namespace {

constexpr double kLowest = 1e-9;            // s, the first bucket's lower edge
constexpr double kRatio = 1.001;            // bucket width
const double kLogRatio = std::log(kRatio);  // NOLINT: computed once
constexpr std::size_t kBuckets = 34'600;    // 1e-9 · 1.001^34600 ≈ 1e6 s

}  // namespace

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * f;
}

LatencySummary summarize(std::vector<double> values) {
  LatencySummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.count = static_cast<std::int64_t>(values.size());
  s.mean = sum / static_cast<double>(values.size());
  s.p50 = percentile_sorted(values, 0.50);
  s.p90 = percentile_sorted(values, 0.90);
  s.p99 = percentile_sorted(values, 0.99);
  return s;
}

LogHistogram::LogHistogram() : counts_(kBuckets + 2, 0) {}

void LogHistogram::add(double seconds) {
  ++n_;
  sum_ += seconds;
  std::size_t b = 0;  // bucket 0: below 1 ns (zero gaps included)
  if (seconds >= kLowest) {
    const double i = std::floor(std::log(seconds / kLowest) / kLogRatio);
    b = 1 + static_cast<std::size_t>(std::min(i, static_cast<double>(kBuckets)));
  }
  ++counts_[b];
}

double LogHistogram::percentile(double q) const {
  if (n_ == 0) return 0;
  // The sample of rank ⌈q·n⌉ (nearest rank), at least the first.
  const auto rank =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(q * static_cast<double>(n_))));
  std::int64_t seen = 0;
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      if (b == 0) return 0;
      return kLowest * std::exp((static_cast<double>(b - 1) + 0.5) * kLogRatio);
    }
  }
  return 0;
}

std::vector<std::pair<double, double>> LogHistogram::cdf(std::size_t points) const {
  std::vector<std::pair<double, double>> out;
  if (n_ == 0 || points == 0) return out;
  const auto n = static_cast<double>(n_);
  std::int64_t seen = 0;
  std::size_t next = 1;  // the next fraction next/points to report
  for (std::size_t b = 0; b < counts_.size() && next <= points; ++b) {
    if (counts_[b] == 0) continue;
    seen += counts_[b];
    const double x =
        b == 0 ? 0.0 : kLowest * std::exp((static_cast<double>(b - 1) + 0.5) * kLogRatio);
    // Every fraction this bucket reaches, reported once at the bucket's own cumulative share.
    if (static_cast<double>(seen) / n >= static_cast<double>(next) / static_cast<double>(points)) {
      out.emplace_back(x, static_cast<double>(seen) / n);
      while (next <= points && static_cast<double>(seen) / n >=
                                   static_cast<double>(next) / static_cast<double>(points))
        ++next;
    }
  }
  return out;
}

LatencySummary LogHistogram::summary() const {
  LatencySummary s;
  s.count = n_;
  if (n_ == 0) return s;
  s.mean = sum_ / static_cast<double>(n_);
  s.p50 = percentile(0.50);
  s.p90 = percentile(0.90);
  s.p99 = percentile(0.99);
  return s;
}

}  // namespace meshsim
