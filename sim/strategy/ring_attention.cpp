#include "strategy/ring_attention.hpp"

namespace meshsim {

AttentionShape ring_attention_step(const AttentionShape& rank, std::int64_t cp) {
  AttentionShape step = rank;
  step.seq_kv = rank.seq_kv / (2 * cp);
  step.causal = false;
  step.balanced = false;
  return step;
}

double ring_attention_scale(const ComputeModel& cm, const Kernel& rank, std::int64_t cp) {
  if (cp <= 1 || rank.kind != KernelKind::attention || !rank.attention.balanced) return 1.0;
  const double whole = cm.seconds(rank);
  if (!(whole > 0)) return 1.0;
  const Kernel step = attention_kernel(ring_attention_step(rank.attention, cp), rank.dtype);
  return static_cast<double>(cp) * cm.seconds(step) / whole;
}

}  // namespace meshsim
