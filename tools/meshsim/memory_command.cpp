// meshsim memory --workload W --mesh dp=64[,tp=..,pp=..,cp=..,ep=..] [--zero 0..3]
//                [--recompute none|selective|full] [--seq S --gbs G --mbs B --dtype bf16|fp16|fp8
//                --sp on|off] [--mode train|serve --concurrency C --context S] [--gpu NAME |
//                --topology T] [--json]
// Memory per GPU by category against the GPU's capacity, with a fits / does-not-fit verdict.
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "core/enum_names.hpp"
#include "job_args.hpp"
#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "model/workload.hpp"
#include "parallel/mesh_rules.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim::cli {
namespace {

struct MemoryArgs {
  JobArgs job;
  std::string mode = "train";
  std::int64_t concurrency = 1, max_batch_tokens = 8192;
  std::string context;  // tokens, with K/M suffixes
  std::string kv_dtype;
  std::string gpu, topology;
  std::int32_t nodes = 0;
  double allocator_headroom = -1;
  bool json = false;
};

std::string gb(double bytes) {
  return fmt::format("{:.2f}", bytes / 1e9);
}

int run_memory(const MemoryArgs& a) {
  const bool serve = a.mode == "serve";
  if (!serve && a.mode != "train")
    throw Error("", "--mode", "'" + a.mode + "': expected train or serve");
  const auto resolved_gpu = resolve_gpu(a.gpu, a.topology, a.nodes);
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
  const auto params = count_params(model);
  Json j;
  j["params"] = {{"total", params.total}, {"active", params.active}};
  MemoryBreakdown b;
  std::string header;
  const auto dtype = job_flags.dtype;
  if (serve) {
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
    ServingMemoryJob job;
    job.tp = cfg.mesh.tp;
    job.pp = cfg.mesh.pp;
    job.concurrency = a.concurrency;
    job.context = context;
    job.weight_dtype = dtype;
    job.kv_dtype = a.kv_dtype.empty() ? (dtype == DType::fp8 ? DType::fp8 : DType::bf16)
                                      : dtype_flag(a.kv_dtype, "--kv-dtype");
    if (a.max_batch_tokens < 1) throw Error("", "--max-batch-tokens", "must be a positive integer");
    job.max_batch_tokens = a.max_batch_tokens;
    b = serving_memory(model, job, opt);
    const double kv_token = kv_bytes_per_token(model, job.kv_dtype);
    j["kv_bytes_per_token"] = kv_token;
    header = fmt::format("serving, tp={} pp={}, {} weights, {} KV cache, {} sequences × {} tokens",
                         job.tp, job.pp, name_of(job.weight_dtype), name_of(job.kv_dtype),
                         job.concurrency, job.context);
    if (model.has_architecture())
      header += fmt::format(
          "\n# KV cache {:.4f} MB per token for the whole model ({:.2f} GB per "
          "sequence)",
          kv_token / 1e6, kv_token * static_cast<double>(job.context) / 1e9);
  } else {
    opt.recipe = stack_recipe(job_flags.stack, dtype);
    opt.flash_attention = job_flags.flash_attention;
    TrainingMemoryJob job;
    job.dtype = dtype;
    job.seq = job_flags.seq;
    job.micro_batch = job_flags.micro_batch;
    job.global_batch = job_flags.global_batch;
    if (job.seq <= 0 && model.has_architecture())
      throw Error("", "--seq", "give the sequence length (or a job file with seq)");
    check_mesh(model, cfg,
               {job.seq, job.global_batch, job.micro_batch, true, job_flags.batch_from});
    const auto stages = training_memory_per_stage(model, job, cfg, opt);
    b = worst_stage(stages);
    header = fmt::format(
        "training, {}, ZeRO-{}{}, recompute {}, sp {}, schedule {}\n# seq {}, global batch {}, "
        "micro-batch {}, {}; worst pipeline stage {} of {}",
        to_string(cfg.mesh), cfg.zero,
        cfg.zero == 3 ? (cfg.reshard_after_forward ? " (reshard after forward)" : " (no reshard)")
                      : "",
        name_of(cfg.recompute), cfg.sp ? "on" : "off", to_string(cfg.schedule), job.seq,
        job.global_batch, job.micro_batch, name_of(dtype), b.stage, cfg.mesh.pp);
    j["stage"] = b.stage;
    Json per_stage = Json::array();
    for (const auto& s : stages) per_stage.push_back(s.total());
    j["stage_total_bytes"] = per_stage;
  }
  const double capacity = gpu.hbm_bytes.as_double();
  const bool fits = b.total() <= capacity;
  j["mode"] = a.mode;
  j["mesh"] = mesh_json(cfg.mesh);
  j["per_gpu_bytes"] = memory_json(b);
  j["model_state_bytes"] = b.model_state();
  j["total_bytes"] = b.total();
  j["gpu_bytes"] = capacity;
  j["gpu"] = gpu.model;
  j["fits"] = fits;
  j["activations_modeled"] = b.activations_modeled;
  if (a.json) {
    cli_out() << json_text(j) << "\n";
    return 0;
  }
  cli_out() << fmt::format(
      "# meshsim memory: {} ({:.2f} B parameters, {:.2f} B active per token)\n", model.name,
      params.total / 1e9, params.active / 1e9);
  cli_out() << "# " << header << "\n";
  cli_out() << fmt::format("# GPU {} ({} GB); GB = 10^9 bytes\n", gpu.model, gb(capacity));
  if (!b.activations_modeled)
    cli_out() << "# the model is given by its parameter count only: activations, workspaces and "
                 "KV cache need an architecture and are not included\n";
  cli_out() << fmt::format("{:<16}{:>12}\n", "category", "GB per GPU");
  const std::pair<const char*, double> rows[] = {
      {"weights", b.weights},     {"gradients", b.gradients},
      {"optimizer", b.optimizer}, {"activations", b.activations},
      {"temporary", b.temporary}, {"communication", b.communication},
      {"allocator", b.allocator}, {"kv_cache", b.kv_cache}};
  for (const auto& [name, v] : rows) cli_out() << fmt::format("{:<16}{:>12}\n", name, gb(v));
  cli_out() << fmt::format("{:<16}{:>12}\n", "model state", gb(b.model_state()));
  cli_out() << fmt::format("{:<16}{:>12}\n", "total", gb(b.total()));
  if (fits)
    cli_out() << fmt::format("verdict: fits ({} GB free of {})\n", gb(capacity - b.total()),
                             gb(capacity));
  else
    cli_out() << fmt::format("verdict: does not fit ({} GB over {})\n", gb(b.total() - capacity),
                             gb(capacity));
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
