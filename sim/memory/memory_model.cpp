#include "memory/memory_model.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "core/units.hpp"
#include "model/op_catalogue.hpp"
#include "model/param_count.hpp"
#include "model/recompute.hpp"

namespace meshsim {
namespace {

struct StageParams {
  double dense = 0, expert = 0;
};

// Whether a stage's ZeRO-2/3 gradients accumulate unsharded over the step (a pipeline run by a
// stack whose sharded data parallelism syncs once per step, PrecisionRecipe::sharded_with_pp).
bool unsharded_over_step(const ParallelConfig& c, const PrecisionRecipe& r) {
  return syncs_once_per_step(r.sharded_with_pp, c.zero, c.mesh.pp);
}

// Weights, gradients and optimizer state of `p` parameters sharded over `n` replicas at a ZeRO
// stage.
void add_model_state(MemoryBreakdown& b, double p, double n, const ParallelConfig& c,
                     const PrecisionRecipe& r) {
  const auto zero = c.zero;
  b.weights += p * r.weight_bytes / (zero >= 3 ? n : 1.0);
  // Accumulated unsharded, the gradients of the whole stage are held until its last backward
  // reduce-scatters them (the sharded result then replaces them: the peak is the unsharded set).
  b.gradients += p * r.grad_bytes / (zero >= 2 && !unsharded_over_step(c, r) ? n : 1.0);
  b.optimizer += p * (r.master_bytes + r.optimizer_bytes) / (zero >= 1 ? n : 1.0);
}

std::int64_t communicators(std::initializer_list<std::int64_t> degrees) {
  std::int64_t n = 0;
  for (auto g : degrees) n += g > 1 ? 1 : 0;
  return n;
}

void finish(MemoryBreakdown& b, const MemoryOptions& o) {
  b.allocator = 0;
  b.allocator = o.allocator_fraction * b.total() + o.runtime_bytes;
}

std::vector<MemoryBreakdown> params_only_stages(const ModelSpec& model,
                                                const ParallelConfig& config,
                                                const MemoryOptions& options) {
  // Only the parameter count is known: parameters are spread evenly over TP and PP, and there
  // is nothing to say about activations or workspaces.
  const auto& mesh = config.mesh;
  std::vector<MemoryBreakdown> out(static_cast<std::size_t>(mesh.pp));
  for (std::int64_t s = 0; s < mesh.pp; ++s) {
    auto& b = out[static_cast<std::size_t>(s)];
    b.stage = s;
    b.activations_modeled = false;
    const double p = *model.declared_params / as_double(mesh.tp * mesh.pp);
    add_model_state(b, p, as_double(mesh.shard_group()), config, options.recipe);
    // Known by its count only: every parameter counted as an FP8 GEMM's weight.
    b.weights +=
        p * options.recipe.fp8_copy_bytes / (config.zero >= 3 ? as_double(mesh.shard_group()) : 1);
    b.communication = as_double(communicators({mesh.tp, mesh.pp, mesh.cp, mesh.dp, mesh.ep})) *
                      options.nccl_bytes_per_group;
    finish(b, options);
  }
  return out;
}

}  // namespace

PrecisionRecipe default_recipe(DType dtype) {
  PrecisionRecipe r;
  if (dtype == DType::fp8) r.fp8_copy_bytes = 1;  // bf16 weights + fp8 copy
  if (dtype == DType::fp32) {
    r.weight_bytes = 4;  // pure fp32 training: no separate master copy
    r.grad_bytes = 4;
    r.master_bytes = 0;
  }
  return r;
}

PrecisionRecipe stack_recipe(const Stack& stack, DType dtype) {
  if (dtype == DType::fp32) return default_recipe(dtype);
  PrecisionRecipe r;
  r.weight_bytes = stack.state.weight;
  r.fp8_copy_bytes = dtype == DType::fp8 && stack.keeps_fp8_weights() ? 1.0 : 0.0;
  r.grad_bytes = stack.state.grad;
  r.master_bytes = stack.state.master;
  r.optimizer_bytes = stack.state.optimizer;
  r.sharded_with_pp = stack.data_parallel.sharded_with_pp;
  if (dtype == DType::fp8) {
    r.fp8_gathered_weights = gathers_fp8_weights(stack);
    r.fp8_param_weights = stack.fp8_params;
    r.fp8_routed_experts = stack.fp8_routed_experts;
  }
  return r;
}

double microbatches_in_flight(const Schedule& schedule, std::int64_t pp, std::int64_t stage,
                              std::int64_t microbatches) {
  const double m = as_double(std::max<std::int64_t>(microbatches, 1));
  switch (schedule.kind) {
    case ScheduleKind::gpipe:
      return pp <= 1 ? 1.0 : m;
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::zero_bubble:
      return std::min(as_double(pp - stage), m);
    case ScheduleKind::one_f_one_b_overlap:
      // One more: its extra warm-up forward, and in each merged pair the forward's activations
      // while the backward's are still held (DeepSeek-V3 Table 2: PP + 1 for DualPipe against
      // 1F1B's PP).
      return std::min(as_double(pp - stage + 1), m);
    case ScheduleKind::interleaved: {
      // Megatron-LM's interleaved schedule: stage i runs 2(p − i − 1) + (v − 1)·G warm-up
      // forward chunks (G the micro-batch group, p by default), then one more before its first
      // backward; each chunk is 1/v of the stage's layers (Narayanan et al. 2021 §2.2;
      // Korthikanti et al. 2022 §4.2.3 give the same p·(1 + (p − 1)/(p·v)) for the first stage
      // with G = p).
      const double v = as_double(schedule.virtual_stages);
      const std::int64_t group = schedule.group > 0 ? schedule.group : pp;
      const double chunks =
          as_double(2 * (pp - stage - 1) + (schedule.virtual_stages - 1) * group + 1);
      return std::min(chunks, m * v) / v;
    }
  }
  return 1.0;
}

std::vector<MemoryBreakdown> training_memory_per_stage(const ModelSpec& model,
                                                       const TrainingMemoryJob& job,
                                                       const ParallelConfig& config,
                                                       const MemoryOptions& options) {
  if (!model.has_architecture()) return params_only_stages(model, config, options);
  const auto& mesh = config.mesh;
  const auto& recipe = options.recipe;
  const std::int64_t v =
      config.schedule.kind == ScheduleKind::interleaved ? config.schedule.virtual_stages : 1;
  const std::int64_t chunks = mesh.pp * v;
  if (chunks > model.layers)
    throw Error("", "--mesh",
                "pp × virtual stages = " + std::to_string(chunks) + " exceeds the " +
                    std::to_string(model.layers) + " layers of " + model.name);
  const auto per_chunk = job.chunk_layers.size() == static_cast<std::size_t>(chunks)
                             ? job.chunk_layers
                             : split_layers(model.layers, chunks);

  const Sharding sh{mesh.tp, config.sp, mesh.cp, mesh.ep};
  const LayerShape shape{.micro_batch = job.micro_batch,
                         .seq = job.seq,
                         .dtype = job.dtype,
                         .flash_attention = options.flash_attention,
                         .fp8_routed_experts = options.recipe.fp8_routed_experts};

  // Dense layers are all alike, and so are MoE layers: two catalogue calls cover a model.
  struct LayerSummary {
    OpTotals t;
    double dense = 0, expert = 0;
    double gathered_bytes = 0;                       // the layer's weights as FSDP gathers them
    double fp8_linear = 0;                           // of `dense`, the FP8 linears' (is_fp8_linear)
    double fp8_gemm_dense = 0, fp8_gemm_expert = 0;  // weights an FP8 GEMM reads
    double checkpoint = 0;                           // full recompute keeps the layer input
    double selective_dropped = 0;                    // what the selective policy does not keep
  };
  std::map<bool, LayerSummary> cache;
  // An FP8 gather runs only where the state is sharded (torchtitan turns torchao's float8
  // all-gather on only with dp_shard enabled).
  const bool fp8_gather = recipe.fp8_gathered_weights && mesh.shard_group() > 1;
  auto summary = [&](std::int64_t layer) -> const LayerSummary& {
    const bool moe = model.is_moe_layer(layer);
    auto it = cache.find(moe);
    if (it != cache.end()) return it->second;
    LayerSummary s;
    const auto ops = layer_ops(model, layer, shape, sh);
    s.t = totals(ops);
    s.selective_dropped = resolve_recompute(ops, config.recompute_units).freed_bytes;
    for (const auto& op : ops) {
      (op.expert_weights ? s.expert : s.dense) += op.weight_params;
      s.gathered_bytes += op.weight_params * fsdp_gathered_bytes(fp8_gather, op);
      if (is_fp8_linear(op)) s.fp8_linear += op.weight_params;
      if (op.weight_params > 0 && op.forward.kind == KernelKind::gemm &&
          op.forward.dtype == DType::fp8)
        (op.expert_weights ? s.fp8_gemm_expert : s.fp8_gemm_dense) += op.weight_params;
    }
    // Megatron checkpoints each layer's input (sharded over TP with SP): Korthikanti's 2·s·b·h.
    const double tokens = as_double(job.micro_batch) * as_double(job.seq) / as_double(mesh.cp);
    s.checkpoint = 2.0 * tokens * as_double(model.hidden) / (config.sp ? as_double(mesh.tp) : 1.0);
    return cache.emplace(moe, s).first->second;
  };

  const std::int64_t replicas_batch = mesh.dp * job.micro_batch;
  // A pipeline step's micro-batches: each of the step's pipeline schedules drains before the next.
  const std::int64_t microbatches = std::max<std::int64_t>(
      job.global_batch / replicas_batch / std::max<std::int64_t>(job.pipeline_steps, 1), 1);
  std::vector<MemoryBreakdown> out(static_cast<std::size_t>(mesh.pp));
  std::vector<std::int64_t> first_layer(static_cast<std::size_t>(chunks), 0);
  for (std::int64_t c = 1; c < chunks; ++c)
    first_layer[static_cast<std::size_t>(c)] =
        first_layer[static_cast<std::size_t>(c - 1)] + per_chunk[static_cast<std::size_t>(c - 1)];

  for (std::int64_t s = 0; s < mesh.pp; ++s) {
    auto& b = out[static_cast<std::size_t>(s)];
    b.stage = s;
    StageParams params;
    double act_per_mb = 0, max_layer_params = 0, max_layer_activation = 0, temporary = 0;
    // The stage's layers' parameters and their bytes as FSDP gathers them.
    double layer_params = 0, stage_gathered = 0, max_layer_gathered = 0, fp8_linear = 0;
    double fp8_gemm_dense = 0, fp8_gemm_expert = 0;
    std::int64_t rebuilt_layers = 0;  // the most layers full recompute rebuilds at once
    for (std::int64_t c = s; c < chunks; c += mesh.pp) {
      const auto first = first_layer[static_cast<std::size_t>(c)];
      rebuilt_layers = std::max<std::int64_t>(
          rebuilt_layers,
          std::min<std::int64_t>(config.recompute_group, per_chunk[static_cast<std::size_t>(c)]));
      for (std::int64_t l = first; l < first + per_chunk[static_cast<std::size_t>(c)]; ++l) {
        const auto& ls = summary(l);
        params.dense += ls.dense;
        params.expert += ls.expert;
        max_layer_params = std::max(max_layer_params, ls.dense + ls.expert);
        layer_params += ls.dense + ls.expert;
        stage_gathered += ls.gathered_bytes;
        fp8_linear += ls.fp8_linear;
        fp8_gemm_dense += ls.fp8_gemm_dense;
        fp8_gemm_expert += ls.fp8_gemm_expert;
        max_layer_gathered = std::max(max_layer_gathered, ls.gathered_bytes);
        const double full = ls.t.saved_bytes + ls.t.score_bytes;
        max_layer_activation = std::max(max_layer_activation, full);
        switch (config.recompute) {
          case Recompute::none:
            act_per_mb += full;
            break;
          case Recompute::selective:
            act_per_mb += std::max(0.0, full - ls.selective_dropped);
            break;
          case Recompute::full:
            // torchtitan's `layer` policy checkpoints only every n-th layer, Megatron's block
            // method the first n of a chunk; its uniform groups keep one input per group.
            if (!config.checkpointed(l - first))
              act_per_mb += full;
            else if ((l - first) % config.recompute_group == 0)
              act_per_mb += ls.checkpoint;
            break;
        }
      }
    }
    if (s == 0) {
      const auto t = totals(embedding_ops(model, shape, sh));
      params.dense += t.weight_params;
      act_per_mb += t.saved_bytes;
    }
    if (s == mesh.pp - 1) {
      const auto t = totals(head_ops(model, shape, sh));
      params.dense += t.weight_params;
      act_per_mb += t.saved_bytes;
      temporary += t.temporary_bytes;
      // A tied head on its own stage keeps a copy of the embedding (Megatron all-reduces the
      // two copies' gradients).
      if (model.tied_embeddings && mesh.pp > 1)
        params.dense += as_double(model.vocab) * as_double(model.hidden) / as_double(mesh.tp);
    }
    // Dense state is sharded over the shard group (all DP × CP ranks, or an HSDP sub-group).
    add_model_state(b, params.dense, as_double(mesh.shard_group()), config, recipe);
    // The FP8 copies of the weights FP8 GEMMs read (sharded as the rest).
    const double dense_shards = config.zero >= 3 ? as_double(mesh.shard_group()) : 1.0;
    const double expert_shards = config.zero >= 3 ? as_double(mesh.expert_replicas()) : 1.0;
    b.weights +=
        recipe.fp8_copy_bytes * (fp8_gemm_dense / dense_shards + fp8_gemm_expert / expert_shards);
    // FP8 parameters: the FP8 linears' working weights are one byte, neither the 16-bit weight
    // nor its copy.
    if (recipe.fp8_param_weights)
      b.weights -= fp8_linear *
                   (recipe.weight_bytes + recipe.fp8_copy_bytes - bytes_of(DType::fp8)) /
                   dense_shards;
    add_model_state(b, params.expert, as_double(mesh.expert_replicas()), config, recipe);

    b.activations = act_per_mb * microbatches_in_flight(config.schedule, mesh.pp, s, microbatches);
    if (config.zero >= 3) {
      // FSDP/ZeRO-3 gathers each layer's full weights: the current layer and the prefetched
      // next one, plus the layer's unsharded gradients before their reduce-scatter (counted
      // with the gradients when they accumulate unsharded over the step). Without resharding
      // after forward, every layer's gathered weights stay until its backward. Gathered weights
      // are 16-bit (kGatheredBytesPerParam), the FP8 linears' one byte on a stack with an FP8
      // FSDP all-gather; the ends (embedding, head) gather 16 bits.
      const double n = as_double(mesh.shard_group());
      const double ends = params.dense + params.expert - layer_params;
      const double gathered =
          config.reshard_after_forward
              ? 2.0 * max_layer_gathered
              : (stage_gathered + ends * kGatheredBytesPerParam) * (1.0 - 1.0 / n);
      temporary +=
          gathered +
          (unsharded_over_step(config, recipe) ? 0.0 : max_layer_params * recipe.grad_bytes);
    }
    // Full recompute rebuilds one layer's activations during its backward (a uniform group's
    // layers at once).
    if (config.recompute == Recompute::full)
      temporary += as_double(rebuilt_layers) * max_layer_activation;
    b.temporary = temporary;
    b.communication = as_double(communicators({mesh.tp, mesh.pp, mesh.cp, mesh.dp, mesh.ep})) *
                      options.nccl_bytes_per_group;
    if (config.zero >= 2 && mesh.dense_replicas() > 1)
      b.communication += 2.0 * options.bucket_bytes;
    finish(b, options);
  }
  return out;
}

std::array<MemoryCategory, 8> memory_categories(const MemoryBreakdown& b) {
  return {{{"weights", b.weights},
           {"gradients", b.gradients},
           {"optimizer", b.optimizer},
           {"activations", b.activations},
           {"temporary", b.temporary},
           {"communication", b.communication},
           {"allocator", b.allocator},
           {"kv_cache", b.kv_cache}}};
}

MemoryBreakdown worst_stage(const std::vector<MemoryBreakdown>& stages) {
  if (stages.empty()) return {};
  return *std::max_element(stages.begin(), stages.end(),
                           [](const auto& a, const auto& b) { return a.total() < b.total(); });
}

std::vector<bool> stages_within(const std::vector<MemoryBreakdown>& stages, double capacity_bytes) {
  std::vector<bool> within;
  within.reserve(stages.size());
  for (const auto& b : stages) within.push_back(b.total() <= capacity_bytes);
  return within;
}

double kv_bytes_per_token(const ModelSpec& model, DType kv_dtype) {
  if (!model.has_architecture()) return 0;
  const double bytes = bytes_of(kv_dtype);
  if (model.mla)
    return as_double(model.layers) *
           as_double(model.mla->kv_lora_rank + model.mla->qk_rope_head_dim) * bytes;
  return 2.0 * as_double(model.layers) * as_double(model.kv_heads) * as_double(model.head_dim) *
         bytes;
}

MemoryBreakdown serving_memory(const ModelSpec& model, const ServingMemoryJob& job,
                               const MemoryOptions& options) {
  const double wbytes = bytes_of(job.weight_dtype);
  const double t = as_double(job.tp);
  std::vector<MemoryBreakdown> stages(static_cast<std::size_t>(job.pp));
  if (!model.has_architecture()) {
    for (auto& b : stages) {
      b.activations_modeled = false;
      b.weights = *model.declared_params * wbytes / (t * as_double(job.pp));
    }
  } else {
    if (job.pp > model.layers)
      throw Error("", "--mesh",
                  "pp = " + std::to_string(job.pp) + " exceeds the " +
                      std::to_string(model.layers) + " layers of " + model.name);
    const auto per_stage = split_layers(model.layers, job.pp);
    const auto params = count_params(model);
    // Per rank and token: KV heads split over TP while there are enough, replicated after;
    // MLA's latent is replicated over TP.
    const double kv_heads_rank = model.kv_heads >= job.tp ? as_double(model.kv_heads) / t : 1.0;
    const double kv_layer_token =
        model.mla ? as_double(model.mla->kv_lora_rank + model.mla->qk_rope_head_dim) *
                        bytes_of(job.kv_dtype)
                  : 2.0 * kv_heads_rank * as_double(model.head_dim) * bytes_of(job.kv_dtype);
    const double ffn = model.moe ? std::max(as_double(model.ffn),
                                            as_double(model.moe->top_k * model.moe->expert_ffn))
                                 : as_double(model.ffn);
    const double gated = model.activation == Activation::swiglu ? 3.0 : 2.0;
    std::int64_t layer = 0;
    for (std::int64_t s = 0; s < job.pp; ++s) {
      auto& b = stages[static_cast<std::size_t>(s)];
      b.stage = s;
      double p = 0;
      const auto n = per_stage[static_cast<std::size_t>(s)];
      for (std::int64_t l = layer; l < layer + n; ++l) p += layer_params(model, l);
      layer += n;
      // The embedding table and the LM head stay 16-bit in FP8 checkpoints (only the decoder's
      // linear layers are quantized: TensorRT Model Optimizer, vLLM/llm-compressor `ignore:
      // lm_head`); `ends` are weighed at their own dtype.
      double ends = 0;
      if (s == 0) ends += params.embedding;
      if (s == job.pp - 1) {
        ends += params.output;
        p += norm_params(model);
        if (model.tied_embeddings && job.pp > 1)
          ends += as_double(model.vocab) * as_double(model.hidden);
      }
      b.weights = (p * wbytes + ends * bytes_of(unquantized_dtype(job.weight_dtype))) / t;
      b.kv_cache =
          as_double(job.concurrency) * as_double(job.context) * as_double(n) * kv_layer_token;
      // One forward of max_batch_tokens: the layer input and output plus the MLP intermediates
      // (16-bit), and fp32 logits of the sequences that sample a token.
      const double tokens = as_double(job.max_batch_tokens);
      b.temporary = tokens * (2.0 * as_double(model.hidden) + gated * ffn / t) * 2.0;
      if (s == job.pp - 1)
        b.temporary += as_double(std::min(job.concurrency, job.max_batch_tokens)) *
                       as_double(model.vocab) / t * 4.0;
    }
  }
  for (auto& b : stages) {
    b.communication = as_double(communicators({job.tp, job.pp})) * options.nccl_bytes_per_group;
    finish(b, options);
  }
  return worst_stage(stages);
}

}  // namespace meshsim
