#pragma once
// Memory per GPU by category, for training and for serving.
//
// Model state follows the ZeRO paper (Rajbhandari et al. 2020, §3.1 and Figure 1): with Ψ
// parameters, mixed-precision Adam keeps 2Ψ of 16-bit weights, 2Ψ of 16-bit gradients and 12Ψ
// of fp32 master weights and two moments; ZeRO-1 shards the 12Ψ, ZeRO-2 also the gradients,
// ZeRO-3 (FSDP) everything, over the N data-parallel ranks. The byte counts per parameter are a
// `PrecisionRecipe`, so bf16-only and fp8 recipes are expressible. Activations come from the op
// catalogue's saved tensors (Korthikanti et al. 2022 for a GPT layer) times the micro-batches a
// pipeline schedule keeps in flight.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compute/dtype.hpp"
#include "core/units.hpp"
#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "stack/stack.hpp"

namespace meshsim {

struct PrecisionRecipe {
  double weight_bytes = 2;     // working weights (16-bit)
  double grad_bytes = 2;       // gradients (16-bit)
  double master_bytes = 4;     // fp32 master weights
  double optimizer_bytes = 8;  // Adam's two fp32 moments
  // The stack's sharded data parallelism under a pipeline (stack/stack.hpp): `once_per_step`
  // keeps a stage's gradients unsharded, in `grad_bytes`, until the step's last backward.
  ShardedWithPp sharded_with_pp = ShardedWithPp::every_microbatch;
  // FP8 runs: a data-parallel gather moves the FP8 linears' weights in one byte
  // (gathers_fp8_weights), and they are held in one byte, not `weight_bytes` (Stack::fp8_params).
  bool fp8_gathered_weights = false, fp8_param_weights = false;
  // FP8 runs: whether the routed experts' GEMMs run (and are weighed) in FP8
  // (Stack::fp8_routed_experts).
  bool fp8_routed_experts = true;
  // FP8 runs on a stack that keeps an FP8 copy of the weights between steps (Transformer
  // Engine): one byte more for each weight an FP8 GEMM reads, the linears' and the experts'
  // (TE's Linear, LayerNormLinear and GroupedLinear); the embedding, the output layer (Megatron's
  // ColumnParallelLinear, not a TE module, runs in 16 bits) and the norms keep none.
  double fp8_copy_bytes = 0;
  // Per parameter of an FP8 GEMM's weight (the most a parameter takes).
  double per_param() const {
    return weight_bytes + fp8_copy_bytes + grad_bytes + master_bytes + optimizer_bytes;
  }
};

// bf16/fp16: the ZeRO paper's 2 + 2 + 12. fp8 (Transformer Engine): the same plus a 1-byte fp8
// copy of each weight that the fp8 GEMMs read (TE keeps it between steps).
PrecisionRecipe default_recipe(DType dtype);
// A stack's model-state bytes per parameter (stack/stack.hpp), plus the fp8 weight copy for fp8
// where the stack keeps one (Stack::keeps_fp8_weights; torchao casts its weights every forward
// and keeps none); pure fp32 training as default_recipe.
PrecisionRecipe stack_recipe(const Stack& stack, DType dtype);

struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, temporary = 0,
         communication = 0, allocator = 0, kv_cache = 0;
  std::int64_t stage = 0;           // pipeline stage this breakdown is for
  bool activations_modeled = true;  // false for a model given by its parameter count only

  double model_state() const { return weights + gradients + optimizer; }
  double total() const {
    return model_state() + activations + temporary + communication + allocator + kv_cache;
  }
};

// The categories under DESIGN.md's keys, in its order: the one list every report of a breakdown
// (text, JSON, HTML) walks.
struct MemoryCategory {
  const char* name;
  double bytes;
};
std::array<MemoryCategory, 8> memory_categories(const MemoryBreakdown& b);

// Parameters documented where they are defaulted; every one can be set on the command line.
struct MemoryOptions {
  PrecisionRecipe recipe;
  // NCCL buffers per communicator a rank belongs to: 2 peers × 16 channels × NCCL_BUFFSIZE
  // (4 MiB, NCCL's documented default) for a ring.
  double nccl_bytes_per_group = 2.0 * 16 * 4 * 1024 * 1024;
  // Gradient bucket staging for ZeRO-2/3 reduce-scatter: two buckets in flight of PyTorch DDP's
  // default bucket_cap_mb = 25.
  double bucket_bytes = 25.0 * 1024 * 1024;
  // Caching-allocator fragmentation, as a fraction of everything else.
  double allocator_fraction = 0.05;
  // CUDA context, cuBLAS workspaces and loaded kernels, counted with the allocator.
  double runtime_bytes = 512.0 * 1024 * 1024;
  bool flash_attention = true;
};

struct TrainingMemoryJob {
  std::int64_t seq = 0;
  std::int64_t global_batch = 0;
  std::int64_t micro_batch = 1;
  DType dtype = DType::bf16;
  std::vector<std::int64_t> chunk_layers;  // layers per model chunk; empty: split_layers()
  std::int64_t pipeline_steps = 1;         // TrainingJob::pipeline_steps
};

// Every pipeline stage (index = stage); `worst_stage` picks the largest total.
std::vector<MemoryBreakdown> training_memory_per_stage(const ModelSpec& model,
                                                       const TrainingMemoryJob& job,
                                                       const ParallelConfig& config,
                                                       const MemoryOptions& options);
MemoryBreakdown worst_stage(const std::vector<MemoryBreakdown>& stages);
// Whether each stage's total is within `capacity_bytes`, by stage.
std::vector<bool> stages_within(const std::vector<MemoryBreakdown>& stages, double capacity_bytes);

// Micro-batches whose activations a stage holds at its peak (1F1B: pp − stage; GPipe: all m;
// interleaved: Megatron's warm-up count in model-chunk units, divided by v).
double microbatches_in_flight(const Schedule& schedule, std::int64_t pp, std::int64_t stage,
                              std::int64_t microbatches);

struct ServingMemoryJob {
  std::int64_t tp = 1, pp = 1, ep = 1;
  std::int64_t concurrency = 1;  // sequences resident at once
  std::int64_t context = 0;      // tokens per sequence (prompt + output)
  DType weight_dtype = DType::bf16;
  DType kv_dtype = DType::bf16;
  std::int64_t max_batch_tokens = 8192;  // tokens of one forward (vLLM's chunked-prefill budget)
};

// KV cache bytes per token for the whole model (DESIGN.md): 2 × layers × KV heads × head dim ×
// bytes per value; MLA caches the compressed latent plus the RoPE key instead.
double kv_bytes_per_token(const ModelSpec& model, DType kv_dtype);
MemoryBreakdown serving_memory(const ModelSpec& model, const ServingMemoryJob& job,
                               const MemoryOptions& options);

}  // namespace meshsim
