// meshsim memory --workload W --mesh dp=64[,tp=..,pp=..,cp=..,ep=..] [--zero 0..3]
//                [--recompute none|selective|full] [--seq S --gbs G --mbs B --dtype bf16|fp16|fp8
//                --sp on|off] [--stage-layers L | --tune-split] [--mode train|serve
//                --concurrency C --context S] [--gpu NAME | --topology T] [--json]
// Memory per GPU by category against the GPU's capacity, with a fits / does-not-fit verdict.

#include <iostream>

#include "commands.hpp"
#include "compute/compute_model.hpp"
#include "compute/kernel_time.hpp"
#include "job_args.hpp"
#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "model/workload.hpp"
#include "parallel/mesh_rules.hpp"
#include "report/memory_report.hpp"
#include "strategy/pipeline_split.hpp"
#include "topology/topology_loader.hpp"
#include "training/training_split.hpp"

namespace meshsim::cli {
namespace {

struct MemoryArgs {
  JobArgs job;
  std::string mode = "train";
  std::int64_t concurrency = 1, max_batch_tokens = 8192;
  std::string context;  // tokens, with K/M suffixes
  std::string kv_dtype;
  std::string gpu, topology;
  std::string stage_layers;  // training: layers per pipeline chunk (train --stage-layers)
  bool tune_split = false;   // training: the stack's end switches set as search sets them
  std::int32_t nodes = 0;
  double allocator_headroom = -1;
  bool json = false;
};

int run_memory(const MemoryArgs& a) {
  const bool serve = a.mode == "serve";
  if (!serve && a.mode != "train")
    throw Error("", "--mode", "'" + a.mode + "': expected train or serve");
  auto resolved_gpu = resolve_gpu(a.gpu, a.topology, a.nodes);
  const auto& gpu = resolved_gpu.gpu;
  // A training mesh without dp fills the cluster when one is given.
  const auto job_flags =
      a.job.resolve(resolved_gpu.topology && !serve
                        ? static_cast<std::int64_t>(resolved_gpu.topology->gpus().size())
                        : 0);
  const auto& model = job_flags.workload.model;
  auto cfg = job_flags.config;
  MemoryOptions opt;
  if (a.allocator_headroom >= 0) {
    if (a.allocator_headroom > 1) throw Error("", "--allocator-headroom", "must be within [0, 1]");
    opt.allocator_fraction = a.allocator_headroom;
  }
  MemoryRun run;
  run.model = model.name;
  run.params = count_params(model);
  run.has_architecture = model.has_architecture();
  run.gpu = gpu.model;
  run.gpu_bytes = gpu.hbm_bytes.as_double();
  run.config = &cfg;
  run.notes = idle_module_notes(job_flags.stack, cfg.recompute_modules, model);
  const auto dtype = job_flags.dtype;
  ServingMemoryJob serving;
  TrainingMemoryJob training;
  if (serve) {
    if (!a.stage_layers.empty())
      throw Error("", "--stage-layers", "is for training (a serving replica splits its own way)");
    if (a.tune_split)
      throw Error("", "--tune-split", "is for training (a serving replica splits its own way)");
    if (cfg.mesh.dp != 1 || cfg.mesh.cp != 1 || cfg.mesh.ep != 1)
      throw Error("", "--mesh", "a serving replica is tp=..,pp=.. (replicas are separate GPUs)");
    ParallelConfig check;
    check.mesh = cfg.mesh;
    check_mesh(model, check, {});
    if (a.concurrency < 1) throw Error("", "--concurrency", "must be a positive integer");
    const std::int64_t context =
        a.context.empty() ? 0 : parse_token_count(a.context, "", "--context");
    // The bounds of --seq (job_args.cpp) and of a traffic file's request count.
    if (context > (std::int64_t{1} << 24))
      throw Error("", "--context", "must be at most 16777216 tokens");
    if (a.concurrency > (std::int64_t{1} << 26))
      throw Error("", "--concurrency", "must be at most 67108864 sequences");
    if (context == 0 && model.has_architecture())
      throw Error("", "--context",
                  "give the tokens per sequence (prompt + output) to size the KV cache");
    serving.tp = cfg.mesh.tp;
    serving.pp = cfg.mesh.pp;
    serving.concurrency = a.concurrency;
    serving.context = context;
    serving.weight_dtype = dtype;
    serving.kv_dtype = a.kv_dtype.empty() ? (dtype == DType::fp8 ? DType::fp8 : DType::bf16)
                                          : dtype_flag(a.kv_dtype, "--kv-dtype");
    if (a.max_batch_tokens < 1) throw Error("", "--max-batch-tokens", "must be a positive integer");
    serving.max_batch_tokens = a.max_batch_tokens;
    run.serving = &serving;
    run.replica = serving_memory(model, serving, opt);
    run.kv_bytes_per_token = kv_bytes_per_token(model, serving.kv_dtype);
  } else {
    opt.recipe = stack_recipe(job_flags.stack, dtype);
    opt.flash_attention = job_flags.flash_attention;
    training.dtype = dtype;
    training.seq = job_flags.seq;
    training.micro_batch = job_flags.micro_batch;
    training.global_batch = job_flags.global_batch;
    training.pipeline_steps = job_flags.pipeline_steps;
    for (auto& n : unrun_notes(job_flags.stack, cfg.zero, schedule_family(cfg.schedule)))
      run.notes.push_back(std::move(n));
    if (training.seq <= 0 && model.has_architecture())
      throw Error("", "--seq", "give the sequence length (or a job file with seq)");
    check_mesh(model, cfg,
               {training.seq, training.global_batch, training.micro_batch, true,
                job_flags.batch_from, training.pipeline_steps});
    run.training = &training;
    // The launch configuration's split, else the stack's framework split of the layers (the
    // trace builder's when it simulates).
    training.chunk_layers = job_flags.chunk_layers;
    if (!a.stage_layers.empty()) {
      training.chunk_layers = parse_stage_layers(a.stage_layers);
      if (model.has_architecture())
        check_stage_layers(training.chunk_layers, model_chunks(cfg), model);
    }
    if (a.tune_split && !training.chunk_layers.empty())
      throw Error("", "--tune-split",
                  a.stage_layers.empty()
                      ? "the launch configuration gives the split; leave --tune-split out"
                      : "--stage-layers gives the split; leave one of them out");
    // The split train runs (training_split): the stack's, a balanced stack's by estimated time,
    // or with --tune-split the one search picks, by the kernel model of the cluster's profile
    // or the GPU's bundled fit.
    TrainingSetup setup;
    setup.job = {training.seq,   training.global_batch,     training.micro_batch,
                 training.dtype, job_flags.flash_attention, training.pipeline_steps};
    setup.config = cfg;
    setup.memory = opt;
    setup.strategy.stack = job_flags.stack;
    setup.strategy.tp_overlap = job_flags.tp_overlap;
    setup.strategy.chunk_layers = training.chunk_layers;
    setup.strategy.tune_split = a.tune_split;
    if (a.tune_split && !has_peak_flops(gpu, training.dtype))
      throw Error("", "--tune-split",
                  gpu.model + " has no " + std::string(name_of(training.dtype)) +
                      " tensor-core peak to estimate the stages' time");
    std::optional<CalibrationProfile> profile;
    if (resolved_gpu.topology) profile = calibration_for(*resolved_gpu.topology, "");
    auto split =
        training_split(model, setup, ComputeModel(gpu, profile), gpu.hbm_bytes.as_double());
    training.chunk_layers = std::move(split.chunk_layers);
    for (auto& n : split.notes) run.notes.push_back(std::move(n));
    run.stages = training_memory_per_stage(model, training, cfg, opt);
  }
  cli_out() << (a.json ? json_text(memory_run_json(run)) + "\n" : memory_text(run));
  return 0;
}

}  // namespace

Runner add_memory_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("memory", "Memory per GPU by category, and whether it fits");
  auto a = std::make_shared<MemoryArgs>();
  a->job.add_to(cmd);
  cmd->add_option("--mode", a->mode, "train or serve (serve: --mesh tp=..,pp=..)");
  cmd->add_option("--concurrency", a->concurrency, "Serve: sequences resident at once");
  cmd->add_option("--context", a->context, "Serve: tokens per sequence (4096, 4k, 128K)");
  cmd->add_option("--kv-dtype", a->kv_dtype, "Serve: KV cache dtype (default: bf16; fp8 with fp8)");
  cmd->add_option("--max-batch-tokens", a->max_batch_tokens, "Serve: tokens per forward");
  cmd->add_option("--stage-layers", a->stage_layers,
                  "Train: layers per pipeline stage (pp × virtual entries), e.g. 7,8,8,7 "
                  "(default: the stack's split)");
  cmd->add_flag("--tune-split", a->tune_split,
                "Train: the stack's end switches set as search sets them (e.g. Megatron's "
                "--decoder-last-pipeline-num-layers), to balance the stages' estimated time "
                "among the splits that fit");
  cmd->add_option("--gpu", a->gpu, "GPU model (default H100-SXM5-80GB)");
  cmd->add_option("--topology", a->topology, "Take the GPU from a cluster file");
  cmd->add_option("--nodes", a->nodes, "With --topology: rebuild with N nodes")
      ->check(positive_count());
  cmd->add_option("--allocator-headroom", a->allocator_headroom,
                  "Fragmentation as a fraction of the rest (default 0.05)")
      ->check(number_in(0, 1));
  cmd->add_flag("--json", a->json, "Print one JSON document");
  return [a] { return run_memory(*a); };
}

}  // namespace meshsim::cli
