#pragma once
// Latency summaries: mean and percentiles of a sample, exact for per-request metrics and from a
// log-bucketed histogram for per-token gaps (tens of millions of them in a long run).
#include <cstdint>
#include <vector>

namespace meshsim {

struct LatencySummary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  std::int64_t count = 0;
};

// Percentile q ∈ [0, 1] of `sorted` by linear interpolation between closest ranks (NumPy's
// default), 0 for an empty sample.
double percentile_sorted(const std::vector<double>& sorted, double q);
// Sorts a copy; all zeros for an empty sample.
LatencySummary summarize(std::vector<double> values);

// Counts of positive values in geometric buckets 0.1 % wide from 1 ns to ~1e6 s; a percentile
// is the geometric middle of its bucket, so it is within 0.05 % of the exact one. The mean is
// kept exactly.
class LogHistogram {
 public:
  LogHistogram();
  void add(double seconds);
  LatencySummary summary() const;
  double percentile(double q) const;
  // The empirical CDF at `points` evenly spaced fractions (1/points … 1): (bucket centre s,
  // fraction), one pass over the buckets.
  std::vector<std::pair<double, double>> cdf(std::size_t points) const;

 private:
  std::vector<std::int64_t> counts_;
  std::int64_t n_ = 0;
  double sum_ = 0;
};

}  // namespace meshsim
