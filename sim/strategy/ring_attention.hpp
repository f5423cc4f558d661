#pragma once

#include <cstdint>

#include "compute/compute_model.hpp"
#include "compute/kernel.hpp"

namespace meshsim {

// One step of ring attention (Megatron-Core's context parallelism, Transformer Engine's p2p
// ring) on a CP rank whose queries are the sequence's two load-balanced chunks i and 2·cp−1−i of
// c = s/(2·cp) tokens (`rank`: seq_q = 2c, seq_kv = s, balanced). Every step does the same work:
// the diagonal step is the two chunks against themselves under the causal mask, a step with an
// earlier rank's K/V attends all 2c queries to its first chunk (c keys), one with a later rank's
// attends the second query chunk to both of its chunks, 2c keys (TE
// attn_forward_func_with_cp). Priced as 2c queries against c keys, unmasked: cp of them do
// 4·b·heads·d·2c·(s/2), the balanced kernel's work, each over a short key block.
AttentionShape ring_attention_step(const AttentionShape& rank, std::int64_t cp);

// How much longer the cp ring steps take than the one balanced kernel that stands for them:
// cp · t(step) / t(rank); 1 when the rank's attention is not a balanced causal kernel.
double ring_attention_scale(const ComputeModel& cm, const Kernel& rank, std::int64_t cp);

}  // namespace meshsim
