#include "training/reliability.hpp"

#include <algorithm>
#include <cmath>

namespace meshsim {

ReliabilityResult project_reliability(double state_bytes, std::int64_t gpus, std::int64_t nodes,
                                      const ReliabilityOptions& o) {
  ReliabilityResult r;
  r.checkpoint_bytes = state_bytes;
  const double bw = o.storage_Bps > 0 ? o.storage_Bps
                                      : 2e9 * static_cast<double>(std::max<std::int64_t>(nodes, 1));
  r.checkpoint_s = state_bytes / bw;
  r.job_mtbf_s = o.gpu_mtbf_hours * 3600.0 / static_cast<double>(std::max<std::int64_t>(gpus, 1));
  // Young (1974) / Daly (2006) first order: checkpoint every √(2δM); the expected waste per unit
  // time is δ/τ for writing checkpoints plus (τ/2 + R)/M for lost work and restarts.
  r.checkpoint_interval_s = o.checkpoint_interval_s > 0
                                ? o.checkpoint_interval_s
                                : std::sqrt(2.0 * r.checkpoint_s * r.job_mtbf_s);
  const double tau = std::max(r.checkpoint_interval_s, 1e-9);
  const double waste = r.checkpoint_s / tau + (tau / 2.0 + o.restart_s) / r.job_mtbf_s;
  r.goodput_fraction = std::clamp(1.0 - waste, 0.0, 1.0);
  return r;
}

}  // namespace meshsim
