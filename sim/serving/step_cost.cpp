#include "serving/step_cost.hpp"

#include <algorithm>

#include "core/units.hpp"
#include "model/op_catalogue.hpp"
#include "parallel/parallel_config.hpp"

namespace meshsim {
namespace {

constexpr double kActBytes = 2;  // activations between layers and stages are 16-bit

}  // namespace

std::int64_t BatchShape::tokens() const {
  std::int64_t t = decodes + speculated;
  for (const auto& c : prefill) t += c.tokens;
  return t;
}

StepCost::StepCost(const Topology& topo, const ModelSpec& model, ReplicaShape shape,
                   std::vector<std::int32_t> gpus, const ComputeModel& compute, CommContext& comm)
    : topo_(topo),
      model_(model),
      shape_(shape),
      gpus_(std::move(gpus)),
      compute_(compute),
      comm_(comm),
      stage_layers_(split_layers(model.layers, shape.pp)),
      allreduce_cache_(static_cast<std::size_t>(shape.pp)),
      gather_cache_(static_cast<std::size_t>(shape.pp)),
      send_cache_(static_cast<std::size_t>(shape.pp)) {
  // Heads split over TP; KV heads too while there are enough, replicated after (vLLM).
  heads_rank_ = std::max<std::int64_t>(model.heads / shape.tp, 1);
  kv_heads_rank_ = model.kv_heads >= shape.tp ? model.kv_heads / shape.tp : 1;
}

std::int64_t StepCost::first_layer(std::int64_t stage) const {
  std::int64_t l = 0;
  for (std::int64_t s = 0; s < stage; ++s) l += stage_layers_[static_cast<std::size_t>(s)];
  return l;
}

std::vector<std::int32_t> StepCost::group(std::int64_t stage) const {
  const auto begin = gpus_.begin() + stage * shape_.tp;
  return {begin, begin + shape_.tp};
}

double StepCost::layer_dense_seconds(std::int64_t layer, std::int64_t tokens) {
  const bool moe = model_.is_moe_layer(layer);
  auto& cache = dense_cache_[moe ? 1 : 0];
  if (auto it = cache.find(tokens); it != cache.end()) return it->second;
  LayerShape ls;
  ls.micro_batch = 1;
  ls.seq = tokens;
  ls.dtype = shape_.weight_dtype;
  // Routed experts split over the TP ranks (vLLM's TP-sharded experts): each rank holds E/t
  // experts' weights and computes its share of the routed tokens, which is the catalogue's
  // EP = t layout.
  const Sharding sh{.tp = shape_.tp, .sp = false, .cp = 1, .ep = model_.moe ? shape_.tp : 1};
  double s = 0;
  std::int64_t kernels = 0;
  for (const auto& op : layer_ops(model_, layer, ls, sh))
    if (op.forward.kind != KernelKind::attention && !op.forward.empty()) {
      s += compute_.seconds(op.forward);
      ++kernels;
    }
  cache.emplace(tokens, s);
  dense_kernels_[moe ? 1 : 0] = kernels;
  return s;
}

double StepCost::layer_kernels(std::int64_t layer, const BatchShape& batch) {
  const bool moe = model_.is_moe_layer(layer);
  if (dense_kernels_[moe ? 1 : 0] < 0) (void)layer_dense_seconds(layer, padded_tokens(batch));
  const std::int64_t attention = static_cast<std::int64_t>(batch.prefill.size()) +
                                 (batch.decodes > 0 ? 1 : 0) + (batch.tokens() > 0 ? 1 : 0);
  return as_double(dense_kernels_[moe ? 1 : 0] + attention + (shape_.tp > 1 ? 2 : 0));
}

double StepCost::ends_kernels(std::int64_t stage, const BatchShape& batch) const {
  double n = 0;
  if (stage == 0 && batch.tokens() > 0) n += shape_.tp > 1 ? 2 : 1;  // lookup, all-reduce
  if (stage == shape_.pp - 1 && batch.sampled > 0)
    n += shape_.tp > 1 ? 4 : 3;  // norm, logits, gather, softmax
  return n;
}

double StepCost::kernel_gap_s(const BatchShape& batch) const {
  return graphed(batch) ? compute_.graph_kernel_gap_s() : compute_.kernel_gap_s();
}

bool StepCost::graphed(const BatchShape& batch) const {
  const std::int64_t tokens = batch.tokens();
  return batch.prefill.empty() && tokens > 0 && !graph_sizes_.empty() &&
         tokens <= graph_sizes_.back();
}

double StepCost::attention_chunk_seconds(const PrefillChunk& c) const {
  // A chunk after `context` cached tokens: its queries are the last of context + chunk
  // positions, so the causal kernel's work is chunk · (context + chunk/2) (compute/kernel.hpp).
  AttentionShape a;
  a.batch = 1;
  a.seq_q = c.tokens;
  a.seq_kv = c.context + c.tokens;
  a.heads = heads_rank_;
  a.head_dim = model_.head_dim;
  a.kv_heads = kv_heads_rank_;
  a.causal = true;
  return compute_.seconds(attention_kernel(a, DType::bf16));
}

double StepCost::kv_token_bytes() const {
  return model_.mla ? as_double(model_.mla->kv_lora_rank + model_.mla->qk_rope_head_dim) *
                          bytes_of(shape_.kv_dtype)
                    : 2.0 * as_double(kv_heads_rank_) * as_double(model_.head_dim) *
                          bytes_of(shape_.kv_dtype);
}

double StepCost::attention_seconds(const BatchShape& batch) const {
  double s = 0;
  for (const auto& c : batch.prefill) s += attention_chunk_seconds(c);
  if (batch.decodes > 0) {
    // All decodes in one paged decode-attention kernel (FlashDecoding-style split-KV; Dao et
    // al. 2023, vLLM's paged attention v2, FlashInfer): priced by the decode model of
    // compute/kernel_time.hpp — a fixed and a per-sequence cost, and every sequence's KV cache
    // read once plus its query and output. Verifying speculated tokens gives each sequence
    // 1 + k queries, which runs as a batched prefill kernel over the paged cache (vLLM and
    // FlashInfer use their prefill path for it) with the same KV bytes.
    const std::int64_t queries =
        (batch.decodes + batch.speculated + batch.decodes - 1) / batch.decodes;
    AttentionShape a;
    a.batch = batch.decodes;
    a.seq_q = queries;
    a.seq_kv =
        std::max<std::int64_t>((batch.decode_context + batch.decodes - 1) / batch.decodes, 1);
    a.heads = heads_rank_;
    a.head_dim = model_.head_dim;
    a.kv_heads = kv_heads_rank_;
    a.causal = true;
    Kernel k = attention_kernel(a, DType::bf16);
    k.bytes = as_double(batch.decode_context) * kv_token_bytes() +
              2.0 * as_double(batch.decodes + batch.speculated) * as_double(heads_rank_) *
                  as_double(model_.head_dim) * kActBytes;
    s += compute_.seconds(k);
  }
  // Every new token's K and V are appended to the paged cache (read and written once; Vidur
  // times FlashInfer's append separately: vidur-attention-a100.csv kv_cache_save).
  const std::int64_t new_tokens = batch.tokens();
  if (new_tokens > 0)
    s += compute_.seconds(
        memory_kernel(MemoryClass::kv_append, 2.0 * as_double(new_tokens) * kv_token_bytes()));
  return s;
}

double StepCost::priced_seconds(const CollectiveCall& call) {
  const Time alone =
      price_collective(topo_, comm_.router, call, std::nullopt, &comm_.alone, &comm_.scratch).time;
  return (comm_.calibration
              ? calibrated_collective_time(*comm_.calibration, topo_, call, alone, alone)
              : alone)
      .seconds();
}

double StepCost::tp_collective_seconds(std::vector<SecondsCache>& caches, CollectiveOp op,
                                       std::int64_t stage, std::int64_t rows, double row_bytes) {
  if (shape_.tp == 1) return 0;
  auto& cache = caches[static_cast<std::size_t>(stage)];
  if (auto it = cache.find(rows); it != cache.end()) return it->second;
  CollectiveCall call;
  call.op = op;
  call.ranks = group(stage);
  call.bytes = as_double(rows) * row_bytes;
  const double s = priced_seconds(call);
  cache.emplace(rows, s);
  return s;
}

double StepCost::tp_allreduce_seconds(std::int64_t stage, std::int64_t tokens) {
  return tp_collective_seconds(allreduce_cache_, CollectiveOp::all_reduce, stage, tokens,
                               as_double(model_.hidden) * kActBytes);
}

double StepCost::send_seconds(std::int64_t stage, std::int64_t tokens) {
  if (stage + 1 >= shape_.pp) return 0;
  auto& cache = send_cache_[static_cast<std::size_t>(stage)];
  if (auto it = cache.find(tokens); it != cache.end()) return it->second;
  // Each TP rank sends the (replicated) hidden states to its peer of the next stage; the pairs
  // use disjoint GPUs, so one pair's price stands for all.
  CollectiveCall call;
  call.op = CollectiveOp::send_recv;
  call.ranks = {gpus_[static_cast<std::size_t>(stage * shape_.tp)],
                gpus_[static_cast<std::size_t>((stage + 1) * shape_.tp)]};
  call.bytes = as_double(tokens) * as_double(model_.hidden) * kActBytes;
  const double s = priced_seconds(call);
  cache.emplace(tokens, s);
  return s;
}

double StepCost::layer_pass_seconds(const BatchShape& batch) {
  const std::int64_t tokens = padded_tokens(batch);
  if (tokens == 0) return 0;
  const std::int64_t last = model_.layers - 1;
  const double gap = kernel_gap_s(batch);
  return layer_dense_seconds(last, tokens) + attention_seconds(batch) +
         2.0 * tp_allreduce_seconds(shape_.pp - 1, tokens) +
         (gap > 0 ? gap * layer_kernels(last, batch) : 0.0);
}

double StepCost::ends_seconds(std::int64_t stage, const BatchShape& batch) {
  const std::int64_t tokens = batch.tokens();
  double s = 0;
  if (stage == 0 && tokens > 0) {
    // Token embedding: one hidden vector read and written per token; under TP each rank looks
    // up its vocabulary rows and the partial rows are all-reduced (vLLM's
    // VocabParallelEmbedding, Megatron's VocabParallelEmbedding).
    s += compute_.seconds(memory_kernel(
        MemoryClass::gather, 2.0 * kActBytes * as_double(tokens) * as_double(model_.hidden)));
    s += tp_allreduce_seconds(0, tokens);
  }
  if (stage == shape_.pp - 1 && batch.sampled > 0) {
    const std::int64_t vocab_rank = std::max<std::int64_t>(model_.vocab / shape_.tp, 1);
    // Final norm and the logits of the sampling sequences only (vocab column-parallel over TP).
    s += compute_.seconds(memory_kernel(
        MemoryClass::norm, 2.0 * kActBytes * as_double(batch.sampled) * as_double(model_.hidden)));
    // The LM head stays 16-bit in FP8 checkpoints: NVIDIA TensorRT Model Optimizer's FP8 config
    // disables quantization of "*lm_head*", and vLLM's FP8 checkpoints (llm-compressor recipes)
    // list lm_head under `ignore`; only the decoder's linear layers are FP8.
    s += compute_.seconds(
        gemm_kernel(GemmShape{.m = batch.sampled, .n = vocab_rank, .k = model_.hidden, .batch = 1},
                    unquantized_dtype(shape_.weight_dtype)));
    // The vocabulary shards' logits are gathered to one rank (vLLM's LogitsProcessor gathers
    // them; priced as an all-gather of the 16-bit logits, an assumption), which samples: a
    // softmax over the whole vocabulary per sequence, reading 16-bit logits and writing fp32
    // probabilities (top-k/top-p on top are not priced).
    s += logits_gather_seconds(stage, batch.sampled);
    s += compute_.seconds(
        memory_kernel(MemoryClass::softmax,
                      (kActBytes + 4.0) * as_double(batch.sampled) * as_double(model_.vocab)));
  }
  if (const double gap = kernel_gap_s(batch); gap > 0) s += gap * ends_kernels(stage, batch);
  return s;
}

double StepCost::logits_gather_seconds(std::int64_t stage, std::int64_t sampled) {
  return tp_collective_seconds(gather_cache_, CollectiveOp::all_gather, stage, sampled,
                               as_double(model_.vocab) * kActBytes);
}

void StepCost::set_cuda_graph_sizes(std::vector<std::int64_t> sizes) {
  std::sort(sizes.begin(), sizes.end());
  graph_sizes_ = std::move(sizes);
}

std::int64_t StepCost::padded_tokens(const BatchShape& batch) const {
  const std::int64_t tokens = batch.tokens();
  return graphed(batch) ? *std::lower_bound(graph_sizes_.begin(), graph_sizes_.end(), tokens)
                        : tokens;
}

double StepCost::stage_seconds(std::int64_t stage, const BatchShape& batch) {
  const std::int64_t tokens = padded_tokens(batch);
  if (tokens == 0) return 0;
  const std::int64_t first = first_layer(stage);
  const std::int64_t n = stage_layers_[static_cast<std::size_t>(stage)];
  const double attention = attention_seconds(batch);
  const double allreduce = 2.0 * tp_allreduce_seconds(stage, tokens);
  double s = 0;
  // Layers of one kind cost the same; price the first of each kind and count.
  std::int64_t moe_layers = 0;
  for (std::int64_t l = first; l < first + n; ++l) moe_layers += model_.is_moe_layer(l) ? 1 : 0;
  const std::int64_t dense_layers = n - moe_layers;
  const double gap = kernel_gap_s(batch);
  double kernels = ends_kernels(stage, batch);
  if (dense_layers > 0) {
    std::int64_t l = first;
    while (model_.is_moe_layer(l)) ++l;
    s += as_double(dense_layers) * layer_dense_seconds(l, tokens);
    const double per_layer = layer_kernels(l, batch);
    kernels += as_double(dense_layers) * per_layer;
    if (gap > 0) s += gap * as_double(dense_layers) * per_layer;
  }
  if (moe_layers > 0) {
    std::int64_t l = first;
    while (!model_.is_moe_layer(l)) ++l;
    s += as_double(moe_layers) * layer_dense_seconds(l, tokens);
    const double per_layer = layer_kernels(l, batch);
    kernels += as_double(moe_layers) * per_layer;
    if (gap > 0) s += gap * as_double(moe_layers) * per_layer;
  }
  s += as_double(n) * (attention + allreduce);
  s += ends_seconds(stage, batch);
  // An eager step's kernels are launched one by one by the host; when the profile measures the
  // host's time per launch and it exceeds the GPU's, the host sets the step (assumption: host
  // and GPU overlap fully within a step). A captured CUDA graph is one launch.
  if (const double h = compute_.host_per_kernel_s(); h > 0 && !graphed(batch))
    s = std::max(s, h * kernels);
  return s;
}

}  // namespace meshsim
