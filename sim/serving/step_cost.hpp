#pragma once
// How long one iteration of a serving replica takes on each pipeline stage, from the compute
// model and the op catalogue (the forward kernels of every layer at the batch's token count)
// and the network model (TP all-reduces, PP sends), in the spirit of Vidur's per-part batch
// time prediction (reference/serving-model.md): GEMMs, norms and activations scale with the
// tokens of the batch; attention is priced per prefill chunk by (chunk, context) and for all
// decodes together by the KV bytes they read; the TP group all-reduces the layer output twice
// per layer (Megatron's row-parallel attention output and MLP down projection).
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "compute/compute_model.hpp"
#include "compute/dtype.hpp"
#include "model/model_spec.hpp"
#include "strategy/comm_model.hpp"
#include "topology/topology.hpp"

namespace meshsim {

struct ReplicaShape {
  std::int64_t tp = 1, pp = 1;
  DType weight_dtype = DType::bf16;  // GEMM inputs and weights (fp8: W8A8 as TensorRT-LLM/vLLM)
  DType kv_dtype = DType::bf16;
  std::int64_t gpus() const { return tp * pp; }
};

struct PrefillChunk {
  std::int64_t tokens = 0;   // prompt tokens computed in this iteration
  std::int64_t context = 0;  // tokens already in the KV cache before the chunk
};

// What one iteration computes.
struct BatchShape {
  std::vector<PrefillChunk> prefill;
  std::int64_t decodes = 0;         // sequences computing one token each
  std::int64_t decode_context = 0;  // Σ over decodes of the KV tokens each attends to
  std::int64_t sampled = 0;         // logits rows computed (a sampling sequence, a verified token)
  // Speculative decoding: draft tokens the decodes verify on top of their one token each
  // (Σ k_i), and the sequential draft passes that proposed them (max k_i) over the decodes.
  std::int64_t speculated = 0;
  std::int64_t draft_passes = 0;
  std::int64_t tokens() const;
};

// The GPUs of one replica: stage s's TP group is gpus[s·tp .. s·tp + tp).
class StepCost {
 public:
  StepCost(const Topology& topo, const ModelSpec& model, ReplicaShape shape,
           std::vector<std::int32_t> gpus, const ComputeModel& compute, CommContext& comm);

  // Compute and TP communication of stage `stage` for `batch` (layers run back to back; the
  // all-reduce is on the critical path, as in vLLM and TensorRT-LLM without overlap).
  double stage_seconds(std::int64_t stage, const BatchShape& batch);
  // The activations of `tokens` tokens sent from stage `stage` to stage + 1.
  double send_seconds(std::int64_t stage, std::int64_t tokens);
  // Parts of stage_seconds, for tests and breakdowns.
  double layer_dense_seconds(std::int64_t layer, std::int64_t tokens);   // GEMMs, norms, ...
  double attention_seconds(const BatchShape& batch) const;               // one layer
  double tp_allreduce_seconds(std::int64_t stage, std::int64_t tokens);  // one all-reduce
  // One layer of this model over `batch` (its dense kernels at the batch's tokens, attention, two
  // TP all-reduces): the MTP module's transformer block (speculative decoding).
  double layer_pass_seconds(const BatchShape& batch);
  // The model's ends on this stage: the embedding on the first (a vocabulary-parallel lookup
  // and, under TP, the all-reduce of its partial rows), the final norm, logits, their gather
  // to one rank and sampling on the last.
  double ends_seconds(std::int64_t stage, const BatchShape& batch);

  // CUDA-graph decode (engine profile): a decode-only batch of up to the largest size runs the
  // graph captured for the next size up, so its GEMMs, norms and TP collectives cost that many
  // tokens (the padding sequences attend to no context, so attention keeps the real batch).
  void set_cuda_graph_sizes(std::vector<std::int64_t> sizes);
  // The token count a batch's dense parts are priced at.
  std::int64_t padded_tokens(const BatchShape& batch) const;
  // What each kernel of `batch`'s step costs its stream beyond its own duration: the profile's
  // measured gap in a CUDA graph when the batch runs as one (decode-only, within the captured
  // sizes), between kernels launched one by one otherwise; 0 without a measured profile.
  double kernel_gap_s(const BatchShape& batch) const;
  // Whether `batch` runs as a captured CUDA graph: decode-only, within the captured sizes.
  bool graphed(const BatchShape& batch) const;
  const ReplicaShape& shape() const { return shape_; }
  const std::vector<std::int64_t>& stage_layers() const { return stage_layers_; }
  std::int64_t first_layer(std::int64_t stage) const;
  const ComputeModel& compute() const { return compute_; }

 private:
  double attention_chunk_seconds(const PrefillChunk& c) const;
  double kv_token_bytes() const;  // K and V of one token on one rank of one layer
  double logits_gather_seconds(std::int64_t stage, std::int64_t sampled);
  // Kernels of one layer over `batch` (its dense ops, the attention kernels, TP's all-reduces)
  // and of this stage's ends: what the kernel gap is paid on.
  double layer_kernels(std::int64_t layer, const BatchShape& batch);
  double ends_kernels(std::int64_t stage, const BatchShape& batch) const;
  // A TP-group collective over `rows` rows of `row_bytes`, priced once per (stage, rows).
  double tp_collective_seconds(std::vector<std::unordered_map<std::int64_t, double>>& caches,
                               CollectiveOp op, std::int64_t stage, std::int64_t rows,
                               double row_bytes);
  double priced_seconds(const CollectiveCall& call);  // alone, with the measured correction
  std::vector<std::int32_t> group(std::int64_t stage) const;

  const Topology& topo_;
  const ModelSpec& model_;
  ReplicaShape shape_;
  std::vector<std::int32_t> gpus_;
  const ComputeModel& compute_;
  CommContext& comm_;
  std::vector<std::int64_t> stage_layers_;
  std::vector<std::int64_t> graph_sizes_;  // sorted
  std::int64_t heads_rank_ = 0, kv_heads_rank_ = 0;
  // Memoised by token count: dense layer time (for a dense and an MoE layer), all-reduce per
  // stage, send per stage.
  std::unordered_map<std::int64_t, double> dense_cache_[2];
  std::int64_t dense_kernels_[2] = {-1, -1};  // a dense and an MoE layer's non-attention ops
  using SecondsCache = std::unordered_map<std::int64_t, double>;  // by token or sequence count
  std::vector<SecondsCache> allreduce_cache_, gather_cache_, send_cache_;
};

}  // namespace meshsim
