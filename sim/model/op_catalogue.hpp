#pragma once
// The op catalogue: every op of one transformer layer and of the two ends of the model
// (embedding; final norm, logits and loss), with its kernels for forward, backward-input (dgrad)
// and backward-weight (wgrad), the FLOPs that count for MFU, the bytes it keeps for backward and
// the weights it owns, all per rank under a given TP / SP / CP / EP sharding.
//
// Sharding follows Megatron-LM (Shoeybi et al. 2019; Korthikanti et al. 2022): QKV and the first
// MLP GEMM are column-parallel, the output projection and the second MLP GEMM row-parallel;
// norms, dropouts and residual adds run on the full sequence of the TP group, or on 1/t of it
// with sequence parallelism. Context parallelism splits the sequence into cp chunks (each rank's
// queries attend to the whole sequence's keys). Routed experts are split over EP ranks with
// expert tensor parallelism 1 (Megatron-Core's recommended MoE layout); MoE layers see 1/t of the
// tokens, as Megatron requires sequence parallelism for MoE with TP.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compute/dtype.hpp"
#include "compute/kernel.hpp"
#include "model/model_spec.hpp"

namespace meshsim {

// How an op's weights and activations are split across a TP group; the strategy derives the
// collectives from it (column → all-gather before with SP; row → all-reduce or reduce-scatter
// after).
enum class TpRole { replicated, column_parallel, row_parallel, sharded_core, expert };
std::string_view name_of(TpRole r);

struct OpSpec {
  std::string name;
  std::string block;  // "attention", "mlp", "moe", "embedding", "head"
  TpRole role = TpRole::replicated;
  Kernel forward, backward_input, backward_weight;
  // GEMM and attention FLOPs of the forward pass under the MFU convention (DESIGN.md; PaLM,
  // Narayanan et al.): 2·M·N·K per GEMM, 4·b·s_q·s_kv·heads·d for attention with the full
  // (non-causal) s² count even though causal kernels skip half. Backward counts 2× forward.
  double model_flops = 0;
  // Bytes kept from forward for backward on this rank (16-bit activations, 1-byte dropout
  // masks). `score_bytes` are the s²-sized attention tensors (softmax output, its dropout mask
  // and output) that selective recompute drops and fused attention never stores.
  double saved_bytes = 0;
  double score_bytes = 0;
  // The part of `saved_bytes` that is the op's activation input (what an output-discarding
  // checkpoint of the op producing it frees): all of it but for the router (not its fp32
  // probabilities) and the attention core (Q, K, V, not the log-sum-exp).
  double saved_input_bytes = 0;
  // Workspace alive only while this op runs (logits in fp32 for the loss).
  double temporary_bytes = 0;
  double weight_params = 0;     // parameters this op owns on this rank
  bool expert_weights = false;  // sharded by EP and replicated over the expert data-parallel group
  // A GEMM that is several linears' outputs concatenated (QKV: q, k, v; a gated MLP's up: gate,
  // up): each part's name and output columns, for stacks that run them as separate GEMMs.
  std::vector<std::pair<std::string, std::int64_t>> gemm_parts;
};

// The forward, dgrad and wgrad kernels of one part of a GEMM op (`columns` of its N).
struct GemmPartKernels {
  Kernel forward, backward_input, backward_weight;
};
GemmPartKernels gemm_part_kernels(const OpSpec& op, std::int64_t columns);

struct Sharding {
  std::int64_t tp = 1;
  bool sp = false;
  std::int64_t cp = 1;
  std::int64_t ep = 1;
};

struct LayerShape {
  std::int64_t micro_batch = 1;
  std::int64_t seq = 2048;
  DType dtype = DType::bf16;    // GEMM inputs; activations are kept in 16 bits
  bool flash_attention = true;  // fused attention: the s² scores never reach HBM
  bool causal = true;
  // FP8 runs: whether the routed experts' GEMMs run in FP8 too, or in 16 bits (the software
  // stack says: Stack::fp8_routed_experts).
  bool fp8_routed_experts = true;
};

// The ops of layer `layer` (0-based; MoE models have dense first layers).
std::vector<OpSpec> layer_ops(const ModelSpec& m, std::int64_t layer, const LayerShape& shape,
                              const Sharding& sharding);
// Token (and learned position) embedding, on the first pipeline stage.
std::vector<OpSpec> embedding_ops(const ModelSpec& m, const LayerShape& shape,
                                  const Sharding& sharding);
// Final norm, logits GEMM and cross-entropy loss, on the last pipeline stage.
std::vector<OpSpec> head_ops(const ModelSpec& m, const LayerShape& shape, const Sharding& sharding);

struct OpTotals {
  double model_flops = 0;  // forward only
  double saved_bytes = 0;  // without the score tensors
  double score_bytes = 0;
  double temporary_bytes = 0;  // the largest single op's workspace
  double weight_params = 0;
};
OpTotals totals(const std::vector<OpSpec>& ops);

// Training FLOPs per token (forward + backward, no recomputation) from the catalogue, unsharded.
double training_flops_per_token(const ModelSpec& m, std::int64_t seq);

}  // namespace meshsim
