// meshsim ops --workload W (--gpu NAME | --topology T) --tokens N [--tp T] [--dtype bf16|fp16|fp8]
//             [--pass forward|backward] [--context C] [--decode B] [--layer L]
//             [--calibration P] [--json]
// One transformer layer's kernels on one GPU, priced by the kernel model: the first thing a
// performance engineer asks of a simulator (sim/report/ops_report.hpp).
#include <iostream>

#include "commands.hpp"
#include "job_args.hpp"
#include "model/model_registry.hpp"
#include "model/workload.hpp"
#include "report/ops_report.hpp"

namespace meshsim::cli {
namespace {

struct OpsArgs {
  std::string workload, gpu, topology, dtype = "bf16", pass = "forward", calibration,
                                       stack = "megatron";
  std::int32_t nodes = 0;
  std::int64_t tokens = 0, tp = 1, context = 0, decode = 0, layer = -1;
  bool json = false;
};

int run_ops(const OpsArgs& a) {
  const auto workload = load_workload_or_model_id(a.workload, hf_hub_cache_dir());
  auto resolved = resolve_gpu(a.gpu, a.topology, a.nodes);
  std::optional<CalibrationProfile> profile;
  if (resolved.topology)
    profile = calibration_for(*resolved.topology, a.calibration);
  else if (!a.calibration.empty())
    profile = load_calibration_profile(a.calibration);
  const ComputeModel cm(resolved.gpu, profile);
  OpsRequest q;
  q.tokens = a.tokens;
  q.tp = a.tp;
  q.dtype = dtype_flag(a.dtype, "--dtype");
  if (a.pass != "forward" && a.pass != "backward")
    throw Error("", "--pass", "'" + a.pass + "': expected forward or backward");
  q.backward = a.pass == "backward";
  q.context = a.context;
  q.decode = a.decode;
  q.layer = a.layer;
  const Stack stack = resolve_stack(a.stack);
  q.stack = &stack;
  const auto report = ops_report(workload.model, cm, q);
  if (a.json)
    cli_out() << json_text(to_json(report)) << "\n";
  else
    cli_out() << to_text(report);
  return 0;
}

}  // namespace

Runner add_ops_command(CLI::App& app) {
  auto a = std::make_shared<OpsArgs>();
  auto* cmd = app.add_subcommand("ops", "One layer's kernels on one GPU: time, FLOPs, bytes");
  cmd->add_option("--workload", a->workload, "Model or job file (workloads/models/*.json)")
      ->required();
  cmd->add_option("--gpu", a->gpu, "GPU catalogue name (default H100-SXM5-80GB)");
  cmd->add_option("--topology", a->topology, "Cluster file: its GPU and calibration profile");
  cmd->add_option("--nodes", a->nodes, "Rebuild a parametric cluster with N nodes")
      ->check(positive_count());
  cmd->add_option("--tokens", a->tokens, "Tokens in the pass (all sequences together)")->required();
  cmd->add_option("--tp", a->tp, "Tensor-parallel degree (one GPU's shard)");
  cmd->add_option("--dtype", a->dtype, "GEMM dtype: bf16, fp16 or fp8");
  cmd->add_option("--pass", a->pass, "forward or backward (dgrad and wgrad kernels)");
  cmd->add_option("--context", a->context, "Cached tokens before the new ones (prefill chunk)");
  cmd->add_option("--decode", a->decode,
                  "Attention as one decode step of B sequences of --context tokens each");
  cmd->add_option("--layer", a->layer, "Layer index (default: first, or first MoE layer)");
  cmd->add_option("--calibration", a->calibration, "Calibration profile (JSON)");
  cmd->add_option("--stack", a->stack,
                  "Software stack whose kernels are listed (default megatron; ideal: the "
                  "catalogue's fused kernels)");
  cmd->add_flag("--json", a->json, "Print one JSON document");
  return [a] { return run_ops(*a); };
}

}  // namespace meshsim::cli
