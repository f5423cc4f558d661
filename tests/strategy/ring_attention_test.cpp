#include "strategy/ring_attention.hpp"

#include <doctest/doctest.h>

#include "topology/gpu_spec.hpp"

using namespace meshsim;

TEST_CASE("ring attention: cp equal steps of 2c queries against c keys") {
  // A CP rank of an 8192-token sequence at cp = 4: chunks of c = 1024, the rank's queries are
  // chunks i and 7 − i (2048 tokens) and attend 4096 keys on average.
  AttentionShape rank{1, 2048, 8192, 16, 128, 8, true, false};
  rank.balanced = true;
  const auto step = ring_attention_step(rank, 4);
  CHECK(step.seq_q == 2048);
  CHECK(step.seq_kv == 1024);
  CHECK(!step.causal);
  CHECK(!step.balanced);
  // Four steps do the balanced kernel's work: 4 · 4·2048·1024·16·128 = 4·2048·4096·16·128.
  const auto whole = attention_kernel(rank, DType::bf16);
  CHECK(4 * attention_kernel(step, DType::bf16).flops == whole.flops);
  CHECK(whole.flops == 4.0 * 2048 * 4096 * 16 * 128);

  // The steps' time against the one kernel: the same blocks (1 × 16 heads × 16 query blocks of
  // 128 = 256 ≥ 132 SMs: no split, the same occupancy), so their compute parts differ only by the
  // key-length ramp s_kv/(s_kv + kv_half), at 1024 keys against 8192, and each step pays the
  // kernel's fixed cost.
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto& a = cm.params().attention;
  const double t = cm.seconds(whole);
  const double compute = t - a.fixed_s;
  const double ramp = (1024 + a.kv_half) / 1024 / ((8192 + a.kv_half) / 8192);
  const double expected = (compute * ramp + 4 * a.fixed_s) / t;
  CHECK(ring_attention_scale(cm, whole, 4) == doctest::Approx(expected));
  CHECK(ring_attention_scale(cm, whole, 4) > 1.0);
  // Nothing to scale: no CP, or a kernel that is not a balanced causal one.
  CHECK(ring_attention_scale(cm, whole, 1) == 1.0);
  rank.balanced = false;
  CHECK(ring_attention_scale(cm, attention_kernel(rank, DType::bf16), 4) == 1.0);
  CHECK(ring_attention_scale(cm, gemm_kernel({1024, 1024, 1024, 1}, DType::bf16), 4) == 1.0);
}
