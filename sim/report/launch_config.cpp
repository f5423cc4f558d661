#include "report/launch_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"
#include "strategy/pipeline_split.hpp"

namespace meshsim {
namespace {

// The note of a schedule that merges passes: which, and how the framework's own line says it.
std::string merged_note(const Schedule& s, std::string_view how) {
  return fmt::format(
      "# meshsim merged each steady-state forward with the next backward to hide the EP "
      "all-to-alls ({}){}\n",
      to_string(s), how);
}

// The split a launch configuration is written for: the stack's (an even split when not said), as
// the framework runs it for these layers and chunks (runnable_split).
PipelineSplit launch_split(const LaunchStack& stack, const ModelSpec& m, const ParallelConfig& c) {
  return runnable_split(stack.pipeline_split.value_or(PipelineSplit{PipelineSplitMethod::even}),
                        m.layers, model_chunks(c));
}

// Megatron's uneven split where the stack ran one (a framework that needs the layers to divide,
// and they do not, even with the ends weighed: uneven_ends_chunks): the layers per stage, whose
// ends --decoder-first/last-pipeline-num-layers give. Empty otherwise.
std::vector<std::int64_t> megatron_uneven(const PipelineSplit& split, const ModelSpec& m,
                                          const ParallelConfig& c) {
  if (c.mesh.pp < 2 || split.method != PipelineSplitMethod::even || !split.must_divide ||
      split.embedding_layers + split.loss_layers > 0)
    return {};
  const std::int64_t v = virtual_stages(c);
  const auto chunks = uneven_ends_chunks(m.layers, model_chunks(c), v);
  if (chunks.empty()) return {};
  std::vector<std::int64_t> stages(static_cast<std::size_t>(c.mesh.pp));
  for (std::size_t p = 0; p < stages.size(); ++p) stages[p] = chunks[p] * v;
  return stages;
}

// How a Megatron line gives the split: the ends' weights (--account-for-*), the first and last
// stage's layers (--decoder-first/last-pipeline-num-layers, where `uneven`, the layers of each
// stage, is not empty), or neither where `says` is false (the line below splits evenly; a "# "
// line says what ran).
struct MegatronSplit {
  PipelineSplit weights;
  std::vector<std::int64_t> uneven;
  bool says = true;
};

MegatronSplit megatron_split(const LaunchStack& stack, const ModelSpec& m,
                             const ParallelConfig& c) {
  MegatronSplit out{launch_split(stack, m, c), {}, true};
  out.uneven = megatron_uneven(out.weights, m, c);
  const auto& want = stack.chunk_layers;
  const std::int64_t v = virtual_stages(c), chunks = model_chunks(c);
  if (want.empty() || c.mesh.pp < 2 || static_cast<std::int64_t>(want.size()) != chunks) return out;
  if (want == framework_chunk_layers(out.weights, m, chunks, v)) return out;
  // Another split (a search's tuned one, or meshsim's own by time or parameters): Megatron's
  // even split with the ends weighed, or its first and last stage given.
  const PipelineSplit plain{PipelineSplitMethod::even, 0, 0, true};
  if (const auto w = weights_giving(plain, m, want, v)) return {*w, {}, true};
  // The first and last stage given: every chunk of a stage alike (its layers spread evenly over
  // its virtual stages), the middle stages alike. `uneven` holds each stage's layers.
  const auto pp = static_cast<std::size_t>(c.mesh.pp);
  bool says = true;
  for (std::size_t g = 0; g < want.size(); ++g)
    says =
        says && want[g] == want[g % pp] && (g % pp == 0 || g % pp == pp - 1 || want[g] == want[1]);
  if (!says) {
    out.says = false;
    return out;
  }
  std::vector<std::int64_t> stages(pp);
  for (std::size_t p = 0; p < pp; ++p) stages[p] = want[p] * v;
  return {plain, stages, true};
}

// What a Megatron line cannot say, as "# " lines printed before it.
std::string megatron_caveats(const ModelSpec& m, const ParallelConfig& c, const LaunchJob& j,
                             const LaunchStack& stack) {
  std::string s;
  if (j.pipeline_steps > 1)
    s += fmt::format(
        "# meshsim ran the step as {} pipeline schedules (torchtitan's gradient accumulation); "
        "Megatron-LM runs all its micro-batches in one\n",
        j.pipeline_steps);
  if (c.schedule.kind == ScheduleKind::gpipe)
    s += "# Megatron-LM has no GPipe schedule; it runs 1F1B (the line below)\n";
  if (c.schedule.kind == ScheduleKind::zero_bubble)
    s += "# Megatron-LM has no zero-bubble schedule in its main line; the line below is 1F1B\n";
  if (c.schedule.merges())
    s += merged_note(
        c.schedule,
        fmt::format(": Megatron-Core's combined 1F1B, --overlap-moe-expert-parallel-comm from "
                    "Megatron-Core 0.14 (earlier versions have no such flag: drop it for plain {})",
                    c.schedule.overlap ? "interleaved 1F1B" : "1F1B"));
  if (c.zero >= 3 && !c.reshard_after_forward)
    s += "# Megatron-FSDP frees gathered weights after each forward (reshard after forward on); "
         "simulated here with it off\n";
  if (c.recompute == Recompute::selective && !c.recompute_units.empty() &&
      c.recompute_modules.empty())
    s += "# the stack's selective ops are written as Megatron's default module set (core_attn)\n";
  if (c.recompute == Recompute::full && c.recompute_every > 1)
    s += fmt::format(
        "# meshsim recomputed one layer in {}; Megatron's uniform full recompute (below) "
        "re-runs every layer\n",
        c.recompute_every);
  if (!m.has_architecture())
    s += "# the model is known by its parameter count only: no architecture flags\n";
  // The split: Megatron's is even (the ends weighed with --account-for-*, or its first and last
  // stage given); meshsim simulated the stack's (pipeline_split) or the one given.
  const auto ms = megatron_split(stack, m, c);
  const auto& split = ms.weights;
  const auto chunks = model_chunks(c);
  const std::int64_t units = m.layers + split.embedding_layers + split.loss_layers;
  if (!ms.says)
    s += fmt::format(
        "# meshsim simulated the layers split {} over the pipeline chunks, which Megatron's "
        "switches cannot say; the line below splits them evenly\n",
        fmt::join(stack.chunk_layers, ", "));
  else if (c.mesh.pp > 1 && split.method != PipelineSplitMethod::even)
    s += fmt::format(
        "# meshsim split the layers by {} (the stack's split); Megatron splits them evenly\n",
        split.method == PipelineSplitMethod::balanced ? "estimated time" : "parameters");
  else if (c.mesh.pp > 1 && units % chunks != 0 && ms.uneven.empty())
    s += fmt::format(
        "# {} layers{} do not split evenly into {} pipeline chunks: meshsim gave the first {} one "
        "more; Megatron needs --decoder-first-pipeline-num-layers / "
        "--decoder-last-pipeline-num-layers for an uneven split\n",
        m.layers, units != m.layers ? " (with the embedding and loss counted)" : "", chunks,
        units % chunks);
  return s;
}

// The model as Megatron-LM's architecture arguments (megatron/training/arguments.py), so the
// line trains the model that was simulated, not Megatron's defaults.
std::string megatron_architecture(const ModelSpec& m) {
  if (!m.has_architecture()) return "";
  std::string s =
      fmt::format(" --num-layers {} --hidden-size {} --ffn-hidden-size {} --num-attention-heads {}",
                  m.layers, m.hidden, m.ffn, m.heads);
  if (m.kv_heads != m.heads && !m.mla)
    s += fmt::format(" --group-query-attention --num-query-groups {}", m.kv_heads);
  if (!m.mla && m.head_dim != m.hidden / m.heads) s += fmt::format(" --kv-channels {}", m.head_dim);
  if (m.activation == Activation::swiglu) s += " --swiglu";
  if (m.activation == Activation::relu2) s += " --squared-relu";
  s += m.norm == Norm::rmsnorm ? " --normalization RMSNorm" : " --normalization LayerNorm";
  if (m.positions == Positions::rope)
    s += fmt::format(" --position-embedding-type rope --rotary-base {:.0f}", m.rope_theta);
  else
    s += " --position-embedding-type learned_absolute";
  if (m.max_positions > 0) s += fmt::format(" --max-position-embeddings {}", m.max_positions);
  // NullTokenizer with mock data: a benchmark of the simulated shapes as is (it adds an EOD
  // token, so Megatron's padded embedding can be up to 128 rows larger than `vocab`).
  s += fmt::format(" --mock-data --tokenizer-type NullTokenizer --vocab-size {}", m.vocab);
  if (!m.tied_embeddings) s += " --untie-embeddings-and-output-weights";
  if (!m.bias) s += " --disable-bias-linear";
  if (m.qkv_bias) s += " --add-qkv-bias";
  if (!m.dropout) s += " --attention-dropout 0 --hidden-dropout 0";
  if (m.mla)
    s += fmt::format(
        " --multi-latent-attention --q-lora-rank {} --kv-lora-rank {} --qk-head-dim {} "
        "--qk-pos-emb-head-dim {} --v-head-dim {}",
        m.mla->q_lora_rank, m.mla->kv_lora_rank, m.mla->qk_nope_head_dim, m.mla->qk_rope_head_dim,
        m.mla->v_head_dim);
  if (m.moe) {
    s += fmt::format(" --num-experts {} --moe-router-topk {} --moe-ffn-hidden-size {}",
                     m.moe->experts, m.moe->top_k, m.moe->expert_ffn);
    if (m.moe->shared_experts > 0)
      s += fmt::format(" --moe-shared-expert-intermediate-size {}",
                       m.moe->shared_experts * m.moe->expert_ffn);
    // Megatron evaluates --moe-layer-freq as a Python list of 0 (dense) and 1 (MoE) per layer.
    const std::int64_t step = m.moe->layer_step, dense = m.moe->first_dense_layers;
    if (step > 1 && dense == 0 && m.layers % step == 0) {
      s += fmt::format(" --moe-layer-freq '([0]*{}+[1])*{}'", step - 1, m.layers / step);
    } else if (step > 1) {
      std::string list;
      for (std::int64_t l = 0; l < m.layers; ++l)
        list += fmt::format("{}{}", l > 0 ? "," : "", m.is_moe_layer(l) ? 1 : 0);
      s += " --moe-layer-freq '[" + list + "]'";
    } else if (dense > 0) {
      s += fmt::format(" --moe-layer-freq '([0]*{}+[1]*{})'", dense, m.layers - dense);
    }
    if (m.moe->groups > 1)
      s += fmt::format(" --moe-router-num-groups {} --moe-router-group-topk {}", m.moe->groups,
                       m.moe->group_limit);
    s += " --moe-grouped-gemm";
  }
  return s;
}

std::string megatron_args(const ModelSpec& m, const ParallelConfig& c, const LaunchJob& j,
                          const LaunchStack& stack) {
  // Megatron-LM's argument names (megatron/training/arguments.py).
  const auto& mesh = c.mesh;
  std::string s = fmt::format(
      "--tensor-model-parallel-size {} --pipeline-model-parallel-size {} "
      "--context-parallel-size {} --expert-model-parallel-size {} --micro-batch-size {} "
      "--global-batch-size {} --seq-length {}",
      mesh.tp, mesh.pp, mesh.cp, mesh.ep, j.micro_batch, j.global_batch, j.seq);
  if (!m.has_architecture()) s += fmt::format(" --num-layers {}", m.layers);
  s += megatron_architecture(m);
  if (c.sp && mesh.tp > 1) s += " --sequence-parallel";
  if (stack.tp_overlap && c.sp && mesh.tp > 1) s += " --tp-comm-overlap";
  if (stack.fused_loss) s += " --cross-entropy-loss-fusion";
  if (stack.deepep && m.moe && mesh.ep > 1)
    s += " --moe-token-dispatcher-type flex --moe-enable-deepep";
  // Megatron's default is p2p (ring attention): only the all-gather is written.
  if (mesh.cp > 1 && stack.cp_comm == CpComm::allgather)
    s += fmt::format(" --cp-comm-type {}", megatron_cp_comm_type(CpComm::allgather));
  const auto ms = megatron_split(stack, m, c);
  const auto& split = ms.weights;
  const bool weighed = mesh.pp > 1 && split.method == PipelineSplitMethod::even;
  if (weighed && split.embedding_layers > 0) s += " --account-for-embedding-in-pipeline-split";
  if (weighed && split.loss_layers > 0) s += " --account-for-loss-in-pipeline-split";
  if (!ms.uneven.empty())
    s +=
        fmt::format(" --decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {}",
                    ms.uneven.front(), ms.uneven.back());
  if (c.schedule.kind == ScheduleKind::interleaved && c.schedule.virtual_stages > 1) {
    const auto chunks = mesh.pp * c.schedule.virtual_stages;
    const auto units =
        m.layers + (weighed ? split.embedding_layers + split.loss_layers : std::int32_t{0});
    // Megatron reads the first and last stage's layers with the virtual stages per rank only.
    if (units % chunks == 0 && ms.uneven.empty())
      s += fmt::format(" --num-layers-per-virtual-pipeline-stage {}", units / chunks);
    else
      s += fmt::format(" --num-virtual-stages-per-pipeline-rank {}", c.schedule.virtual_stages);
  }
  if (c.schedule.kind == ScheduleKind::interleaved && c.schedule.virtual_stages > 1 &&
      c.schedule.group > 0)
    s += fmt::format(" --microbatch-group-size-per-virtual-pipeline-stage {}", c.schedule.group);
  if (c.schedule.merges()) s += " --overlap-moe-expert-parallel-comm";
  // The ZeRO stage as Megatron shards state: its distributed optimizer shards the optimizer
  // state and fp32 main weights and keeps a full gradient buffer (ZeRO-1:
  // docs/user-guide/features/dist_optimizer.md); gradients and weights are sharded by
  // Megatron-FSDP's strategies optim_grads (ZeRO-2) and optim_grads_params (ZeRO-3)
  // (docs/user-guide/features/megatron_fsdp.md, Megatron-Core ≥ 0.14's flag names).
  if (c.zero == 1) s += " --use-distributed-optimizer --overlap-param-gather";
  if (c.zero >= 2)
    s += fmt::format(" --use-megatron-fsdp --data-parallel-sharding-strategy {}",
                     c.zero == 2 ? "optim_grads" : "optim_grads_params");
  // HSDP: Megatron-Core shards within each of these instances and all-reduces across them
  // (megatron/training/arguments.py); Megatron-FSDP replicates across them with
  // --outer-dp-sharding-strategy no_shard.
  if (c.zero >= 1 && mesh.fsdp > 0) {
    s += fmt::format(" --num-distributed-optimizer-instances {}", mesh.dp / mesh.fsdp);
    if (c.zero >= 2) s += " --outer-dp-sharding-strategy no_shard";
  }
  s += " --overlap-grad-reduce";
  if (c.recompute == Recompute::full)
    s +=
        fmt::format(" --recompute-granularity full --recompute-method {} --recompute-num-layers {}",
                    c.recompute_block > 0 ? "block" : "uniform",
                    c.recompute_block > 0 ? c.recompute_block : c.recompute_group);
  else if (c.recompute == Recompute::selective)
    s += " --recompute-granularity selective";
  if (c.recompute == Recompute::selective && !c.recompute_modules.empty())
    s += fmt::format(" --recompute-modules {}", fmt::join(c.recompute_modules, " "));
  s += j.dtype == DType::fp16 ? " --fp16" : " --bf16";
  if (j.dtype == DType::fp8) s += " --fp8-format hybrid";
  if (j.dtype == DType::fp8 && stack.fp8_params) s += " --fp8-param-gather";
  return s;
}

std::string torchtitan_toml(const ModelSpec& m, const ParallelConfig& c, const LaunchJob& j,
                            const LaunchStack& stack) {
  // torchtitan's job config (torchtitan/config/job_config.py): DDP is the replicate degree,
  // FSDP2 the shard degree.
  const auto& mesh = c.mesh;
  std::string s;
  if (c.zero == 1 || c.zero == 2)
    s += fmt::format(
        "# torchtitan shards with FSDP2 (ZeRO-3) or not at all: ZeRO-{} has no equivalent; "
        "written as FSDP2{}\n",
        c.zero, c.zero == 2 ? " with fsdp_reshard_after_forward = \"never\"" : "");
  if (c.schedule.kind == ScheduleKind::zero_bubble)
    s += "# InterleavedZeroBubble is torchtitan's zero-bubble schedule; meshsim simulated ZB-H1\n";
  // With PP the config's local batch is a whole step's micro-batches (below).
  const std::int64_t microbatches = j.global_batch / (mesh.dp * j.micro_batch);
  if (c.schedule.kind == ScheduleKind::interleaved && mesh.pp > 1 &&
      torchtitan_interleaved_group(microbatches, mesh.pp) != c.schedule.group)
    s += fmt::format(
        "# meshsim ran micro-batch groups of {} (Megatron's order); torchtitan's Interleaved1F1B "
        "groups them by its own rounds\n",
        c.schedule.group > 0 ? c.schedule.group : mesh.pp);
  if (c.schedule.merges())
    s += merged_note(c.schedule,
                     fmt::format("; torchtitan overlaps them in DualPipeV, a different schedule: "
                                 "written as {}",
                                 c.schedule.overlap ? "Interleaved1F1B" : "1F1B"));
  if (c.recompute == Recompute::full && (c.recompute_block > 0 || c.recompute_group > 1))
    s += "# torchtitan checkpoints every block (or every n-th): meshsim recomputed Megatron's " +
         recompute_label(c) + "; written as full AC\n";
  const bool shard = c.zero >= 1;
  // HSDP: FSDP2 shards over `fsdp` of the data-parallel ranks and replicates across the rest.
  const std::int64_t shard_degree = mesh.fsdp > 0 ? mesh.fsdp : mesh.dp;
  const char* schedule = "1F1B";
  switch (c.schedule.kind) {
    case ScheduleKind::gpipe:
      schedule = "GPipe";
      break;
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::one_f_one_b_overlap:
      schedule = "1F1B";
      break;
    case ScheduleKind::interleaved:
      schedule = "Interleaved1F1B";
      break;
    case ScheduleKind::zero_bubble:
      schedule = "InterleavedZeroBubble";
      break;
  }
  const auto [name, flavor] = torchtitan_flavor(m);
  if (name.empty())
    s += fmt::format(
        "# torchtitan registers no flavor of {}: add its ModelArgs (dim {}, n_layers {}, "
        "n_heads {}, n_kv_heads {}, vocab_size {}) and name it here\n",
        m.name, m.hidden, m.layers, m.heads, m.kv_heads, m.vocab);
  s += fmt::format("[model]\nname = \"{}\"\nflavor = \"{}\"\n", name.empty() ? "MODEL" : name,
                   flavor.empty() ? "FLAVOR" : flavor);
  if (j.dtype == DType::fp8) s += "converters = [\"float8\"]\n";
  const bool reshard = c.reshard_after_forward && c.zero != 2;
  s += fmt::format(
      "\n[parallelism]\n"
      "data_parallel_replicate_degree = {}\n"
      "data_parallel_shard_degree = {}\n"
      "fsdp_reshard_after_forward = \"{}\"\n"
      "tensor_parallel_degree = {}\n"
      "pipeline_parallel_degree = {}\n"
      "context_parallel_degree = {}\n"
      "expert_parallel_degree = {}\n"
      "pipeline_parallel_schedule = \"{}\"\n"
      "pipeline_parallel_microbatch_size = {}\n",
      shard ? mesh.dp / shard_degree : mesh.dp, shard ? shard_degree : 1,
      reshard ? "always" : "never", mesh.tp, mesh.pp, mesh.cp, mesh.ep, schedule, j.micro_batch);
  // The split (parse_torchtitan_toml reads it back): the ends' weights, and the stages per rank
  // through pipeline_parallel_layers_per_stage (ceil(units / per) stages) where it is not the
  // default two of an interleaved schedule.
  auto split = launch_split(stack, m, c);
  // A split other than the stack's own (a search's tuned one): the ends' weights that give it.
  if (const auto& want = stack.chunk_layers;
      mesh.pp > 1 && static_cast<std::int64_t>(want.size()) == model_chunks(c) &&
      want != framework_chunk_layers(split, m, c)) {
    if (const auto w =
            weights_giving(PipelineSplit{PipelineSplitMethod::even}, m, want, virtual_stages(c)))
      split = *w;
    else
      s += fmt::format(
          "# meshsim simulated the layers split {} over the pipeline stages, which the ends' "
          "weights cannot say: list the stages in module_fqns_per_model_part\n",
          fmt::join(want, ", "));
  }
  if (mesh.pp > 1 && split.method == PipelineSplitMethod::even)
    s += fmt::format(
        "pipeline_parallel_first_stage_less_layers = {}\n"
        "pipeline_parallel_last_stage_less_layers = {}\n",
        split.embedding_layers, split.loss_layers);
  if (c.schedule.kind == ScheduleKind::interleaved && mesh.pp > 1 &&
      c.schedule.virtual_stages != 2) {
    const std::int64_t stages = mesh.pp * c.schedule.virtual_stages;
    const std::int64_t units = m.layers + (split.method == PipelineSplitMethod::even
                                               ? split.embedding_layers + split.loss_layers
                                               : std::int32_t{0});
    std::int64_t per = 1;
    while (per < units && (units + per - 1) / per > stages) ++per;
    if ((units + per - 1) / per == stages)
      s += fmt::format("pipeline_parallel_layers_per_stage = {}\n", per);
    else
      s += fmt::format(
          "# no pipeline_parallel_layers_per_stage makes {} stages of {} layers (with the ends' "
          "weights): list them in module_fqns_per_model_part\n",
          stages, units);
  }
  if (mesh.cp > 1 && stack.cp_comm)
    s += fmt::format("context_parallel_rotate_method = \"{}\"\n",
                     torchtitan_rotate_method(*stack.cp_comm));
  const bool compiled = stack.name == "torchtitan-compile";
  if (compiled && stack.tp_overlap && c.sp && mesh.tp > 1)
    s += "enable_async_tensor_parallel = true\n";
  // local_batch_size is one rank's batch per optimizer micro-step: torchtitan accumulates
  // gradients over global / (local × dp) steps and, with PP, splits the local batch into
  // micro-batches of pipeline_parallel_microbatch_size (torchtitan/train.py): each pipeline step
  // (LaunchJob::pipeline_steps) is one local batch.
  const std::int64_t local =
      mesh.pp > 1 ? j.global_batch / mesh.dp / std::max<std::int64_t>(j.pipeline_steps, 1)
                  : j.micro_batch;
  s += fmt::format(
      "\n[training]\n"
      "seq_len = {}\n"
      "global_batch_size = {}\n"
      "local_batch_size = {}\n"
      "mixed_precision_param = \"{}\"\n\n"
      "[activation_checkpoint]\n",
      j.seq, j.global_batch, local, j.dtype == DType::fp16 ? "float16" : "bfloat16");
  // torchtitan's selective modes: op-SAC, or every N-th block in full AC (layer SAC).
  if (c.recompute == Recompute::full && c.recompute_every > 1)
    s += fmt::format("mode = \"selective\"\nselective_ac_option = \"{}\"\n", c.recompute_every);
  else if (c.recompute == Recompute::selective)
    s += "mode = \"selective\"\nselective_ac_option = \"op\"\n";
  else
    s += fmt::format("mode = \"{}\"\n", name_of(c.recompute));
  // torchao's float8 all-gather under FSDP (torchtitan turns it on only where FSDP shards).
  if (j.dtype == DType::fp8 && stack.fp8_fsdp_all_gather &&
      *stack.fp8_fsdp_all_gather != Fp8FsdpAllGather::none)
    s += fmt::format(
        "\n[float8]\nenable_fsdp_float8_all_gather = true\n"
        "precompute_float8_dynamic_scale_for_fsdp = {}\n",
        *stack.fp8_fsdp_all_gather == Fp8FsdpAllGather::precomputed ? "true" : "false");
  // The torchtitan-compile stack compiles the blocks and leaves the loss eager (as torchtitan
  // did before compile.components, workloads/stacks/torchtitan-compile.json).
  if (compiled)
    s += fmt::format("\n[compile]\nenable = true\ncomponents = {}\n",
                     stack.fused_loss ? "[\"model\", \"loss\"]" : "[\"model\"]");
  return s;
}

std::string accelerate_yaml(const ModelSpec& m, const ParallelConfig& c, const LaunchJob& j) {
  // Accelerate's FSDP2 plugin (accelerate config file, fsdp_version: 2). It has no TP/PP/CP.
  std::string s;
  const auto& mesh = c.mesh;
  if (mesh.tp > 1 || mesh.pp > 1 || mesh.cp > 1 || mesh.ep > 1)
    s += fmt::format(
        "# Accelerate's FSDP2 plugin cannot express tp={} pp={} cp={} ep={}; this is the data-"
        "parallel part only (use --emit megatron or torchtitan for the whole layout)\n",
        mesh.tp, mesh.pp, mesh.cp, mesh.ep);
  if (mesh.fsdp > 0)
    s += fmt::format(
        "# HSDP (shard over {} data-parallel ranks, {} replicas) is not written here; this file "
        "shards over all of them (use --emit torchtitan or megatron for HSDP)\n",
        mesh.fsdp, mesh.dp / mesh.fsdp);
  if (c.recompute == Recompute::full && (c.recompute_block > 0 || c.recompute_group > 1))
    s += "# Accelerate checkpoints every decoder layer: meshsim recomputed " + recompute_label(c) +
         "; written as activation checkpointing on\n";
  const bool fsdp = c.zero >= 1;
  s += fmt::format(
      "compute_environment: LOCAL_MACHINE\n"
      "distributed_type: {}\n"
      "mixed_precision: {}\n"
      "num_machines: {}\n"
      "num_processes: {}\n",
      fsdp ? "FSDP" : "MULTI_GPU", j.dtype == DType::fp16 ? "fp16" : "bf16", j.nodes,
      j.nodes * j.gpus_per_node);
  if (fsdp) {
    const std::string layer = m.moe ? (m.mla ? "DeepseekV3DecoderLayer" : "MixtralDecoderLayer")
                              : m.format == "hf:gpt2" || m.format == "gpt" ? "GPT2Block"
                                                                           : "LlamaDecoderLayer";
    s += fmt::format(
        "fsdp_config:\n"
        "  fsdp_version: 2\n"
        "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
        "  fsdp_transformer_layer_cls_to_wrap: {}\n"
        "  fsdp_reshard_after_forward: {}\n"
        "  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
        "  fsdp_activation_checkpointing: {}\n",
        layer, c.reshard_after_forward && c.zero >= 3 ? "true" : "false",
        c.recompute == Recompute::full ? "true" : "false");
  }
  return s;
}

}  // namespace

// torchtitan's registered model flavors of the bundled models (torchtitan/models/*/__init__.py).
std::optional<std::int64_t> torchtitan_interleaved_group(std::int64_t n, std::int64_t pp) {
  const auto rounds = std::max<std::int64_t>(1, n / pp);
  if (n % rounds != 0) return std::nullopt;
  return n > pp && n / rounds != pp ? n / rounds : 0;
}

std::string_view megatron_cp_comm_type(CpComm comm) {
  return comm == CpComm::allgather ? "all_gather" : "p2p";
}

std::string_view torchtitan_rotate_method(CpComm comm) {
  return comm == CpComm::allgather ? "allgather" : "alltoall";
}

std::pair<std::string, std::string> torchtitan_flavor(const ModelSpec& m) {
  static const std::pair<const char*, std::pair<const char*, const char*>> kKnown[] = {
      {"meta-llama/Llama-3.1-8B", {"llama3", "8B"}},
      {"meta-llama/Llama-3.1-70B", {"llama3", "70B"}},
      {"meta-llama/Llama-3.1-405B", {"llama3", "405B"}},
      {"deepseek-ai/DeepSeek-V3", {"deepseek_v3", "671B"}}};
  for (const auto& [id, flavor] : kKnown)
    if (m.hf_id == id) return {flavor.first, flavor.second};
  return {};
}

std::string launch_config(const std::string& format, const ModelSpec& model,
                          const ParallelConfig& config, const LaunchJob& job,
                          const LaunchStack& stack) {
  if (format == "megatron")
    return megatron_caveats(model, config, job, stack) + "pretrain_gpt.py " +
           megatron_args(model, config, job, stack) + "\n";
  if (format == "torchtitan") return torchtitan_toml(model, config, job, stack);
  if (format == "accelerate") return accelerate_yaml(model, config, job);
  if (format == "torchrun")
    return megatron_caveats(model, config, job, stack) +
           fmt::format(
               "torchrun --nnodes {} --nproc-per-node {} --rdzv-backend c10d "
               "--rdzv-endpoint $MASTER_ADDR:29500 pretrain_gpt.py {}\n",
               job.nodes, job.gpus_per_node, megatron_args(model, config, job, stack));
  throw Error("", "--emit",
              "'" + format + "': expected megatron, torchtitan, accelerate or torchrun");
}

}  // namespace meshsim

namespace meshsim {

std::string serving_launch_config(const std::string& format, const ModelSpec& model,
                                  const ReplicaShape& shape, std::int64_t replicas,
                                  const SchedulerOptions& scheduler) {
  const bool fp8 = shape.weight_dtype == DType::fp8, kv8 = shape.kv_dtype == DType::fp8;
  std::string out;
  // The engines load a Hugging Face id or a local checkpoint directory, not a meshsim file.
  const std::string id = model.hf_id.empty() ? "MODEL" : model.hf_id;
  if (model.hf_id.empty())
    out += fmt::format(
        "# {} has no Hugging Face id (\"_name_or_path\" in its config): replace MODEL with the "
        "checkpoint's id or directory\n",
        model.file.empty() ? model.name : model.file);
  if (format == "vllm") {
    out += fmt::format("# {} replica(s) of tp={} pp={} ({} GPUs each); model: {}\n", replicas,
                       shape.tp, shape.pp, shape.gpus(), model.name);
    for (std::int64_t r = 0; r < replicas; ++r) {
      std::string devices;
      for (std::int64_t g = 0; g < shape.gpus(); ++g)
        devices += fmt::format("{}{}", g ? "," : "", (r * shape.gpus() + g) % 8);
      out += fmt::format(
          "CUDA_VISIBLE_DEVICES={} vllm serve {} --port {} --tensor-parallel-size {} "
          "--pipeline-parallel-size {} --max-num-seqs {} --max-num-batched-tokens {} "
          "--enable-chunked-prefill --block-size {} --gpu-memory-utilization {}{}{}\n",
          devices, id, 8000 + r, shape.tp, shape.pp, scheduler.max_seqs, scheduler.max_batch_tokens,
          scheduler.block_size, scheduler.memory_fraction(shape.tp),
          fp8 ? " --quantization fp8" : "", kv8 ? " --kv-cache-dtype fp8" : "");
    }
    if (shape.gpus() * replicas > 8)
      out +=
          "# replicas beyond the first node run on the other nodes: set CUDA_VISIBLE_DEVICES "
          "per node as above\n";
    return out;
  }
  if (format == "sglang") {
    return out + fmt::format(
                     "# {} replica(s) of tp={} pp={}; model: {}\n"
                     "python -m sglang.launch_server --model-path {} --tp-size {} --pp-size {} "
                     "--dp-size {} "
                     "--max-running-requests {} --chunked-prefill-size {} --page-size {} "
                     "--mem-fraction-static {}{}{}\n",
                     replicas, shape.tp, shape.pp, model.name, id, shape.tp, shape.pp, replicas,
                     scheduler.max_seqs, scheduler.max_batch_tokens, scheduler.block_size,
                     scheduler.memory_fraction(shape.tp), fp8 ? " --quantization fp8" : "",
                     kv8 ? " --kv-cache-dtype fp8_e4m3" : "");
  }
  throw Error("", "--emit", "'" + format + "': expected vllm or sglang");
}

}  // namespace meshsim
