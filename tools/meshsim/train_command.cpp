// meshsim train --topology T [--nodes N] --workload W --mesh ... [job flags as memory]
//               [--schedule gpipe|1f1b|interleaved:V[:G]|interleaved-overlap:V[:G]|zb|1f1b-overlap]
//               [--stage-layers 7,8,.. | --tune-split]
//               [--full]
//               [--trace FILE.json] [--json] [--allow-oom]
// One training step simulated on the cluster: step time, throughput, MFU/HFU, where the time
// goes (compute, exposed communication by group and op, bubble), memory, checkpoint/goodput.
// A layout that does not fit memory exits 3 with the memory verdict (--allow-oom: the step too).
#include <filesystem>

#include "commands.hpp"
#include "compute/compute_model.hpp"
#include "job_args.hpp"
#include "parallel/placement.hpp"
#include "progress.hpp"
#include "report/chrome_trace.hpp"
#include "report/training_report.hpp"
#include "training/training_sim.hpp"

namespace meshsim::cli {
namespace {

struct TrainArgs {
  ClusterArgs cluster;
  JobArgs job;
  std::string stage_layers, trace, report, degrade_link, rank_order = "tp-cp-dp-pp", straggler,
                                                         calibration;
  bool full = false, allow_oom = false, quiet = false;
  bool tune_split = false;  // --tune-split: the stack's end switches set as search sets them
  double bucket_mb = 0, expert_imbalance = 0, input_stall_s = 0, storage_GBps = 0, mtbf_hours = 0,
         restart_s = -1, checkpoint_interval_s = 0;
};

int run_train(const TrainArgs& a) {
  // A cluster an in-process caller loaded once (embedding.hpp), unless this run changes it.
  const LoadedCluster* lent = a.degrade_link.empty() && a.calibration.empty()
                                  ? lent_cluster(a.cluster.topology, a.cluster.nodes)
                                  : nullptr;
  std::optional<Topology> own;
  if (!lent) own = a.cluster.load();
  const Topology& topo = lent ? *lent->topo : *own;
  if (!a.degrade_link.empty()) {
    // VERTEX:FACTOR, e.g. n3/nic2:0.5 for a NIC running at half speed.
    const auto colon = a.degrade_link.rfind(':');
    const auto name = a.degrade_link.substr(0, colon == std::string::npos ? 0 : colon);
    double factor = 0;
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      std::size_t used = 0;
      const auto rest = a.degrade_link.substr(colon + 1);
      factor = std::stod(rest, &used);
      if (used != rest.size() || !(factor > 0) || factor > 1) throw std::invalid_argument("");
    } catch (const std::logic_error&) {
      throw Error("", "--degrade-link",
                  "'" + a.degrade_link + "': expected VERTEX:FACTOR with 0 < FACTOR <= 1");
    }
    const auto v = own->find(name);
    if (!v) throw Error("", "--degrade-link", "no vertex named '" + name + "' in the cluster");
    own->scale_links_at(*v, factor);
  }
  const auto job = a.job.resolve(static_cast<std::int64_t>(topo.gpus().size()));
  const auto& model = job.workload.model;
  TrainingSetup setup = training_setup(job);
  setup.rank_order = parse_rank_order(a.rank_order, "--rank-order");
  setup.full = a.full;
  if (a.full) {
    // Progress on stderr (progress.hpp): a --full step of a large cluster replays millions of
    // ops for minutes.
    auto progress = std::make_shared<Progress>("ops replayed", a.quiet);
    setup.progress = [progress](std::size_t done, std::size_t total) {
      progress->update(done, total);
    };
  }
  if (!a.stage_layers.empty() && a.tune_split)
    throw Error("", "--tune-split", "--stage-layers gives the split; leave one of them out");
  if (!a.stage_layers.empty()) setup.strategy.chunk_layers = parse_stage_layers(a.stage_layers);
  if (a.tune_split && !setup.strategy.chunk_layers.empty())
    throw Error("", "--tune-split",
                "the launch configuration gives the split; leave --tune-split out");
  setup.strategy.tune_split = a.tune_split;
  if (a.bucket_mb < 0) throw Error("", "--bucket-mb", "must be positive");
  if (a.bucket_mb > 0) setup.strategy.bucket_bytes = a.bucket_mb * 1024 * 1024;
  if (a.expert_imbalance < 0) throw Error("", "--expert-imbalance", "must not be negative");
  setup.strategy.expert_imbalance = a.expert_imbalance;
  if (!a.straggler.empty()) {
    const auto colon = a.straggler.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      const long rank = std::stol(a.straggler.substr(0, colon));
      const double factor = std::stod(a.straggler.substr(colon + 1));
      if (rank < 0 || rank >= static_cast<long>(topo.gpus().size()) || !(factor >= 1.0))
        throw std::invalid_argument("");
      setup.strategy.straggler_rank = static_cast<std::int32_t>(rank);
      setup.strategy.straggler_factor = factor;
    } catch (const std::logic_error&) {
      throw Error(
          "", "--straggler",
          "'" + a.straggler + "': expected RANK:FACTOR with an existing rank and a factor >= 1");
    }
  }
  if (a.input_stall_s < 0) throw Error("", "--input-stall", "must not be negative");
  setup.input_stall_s = a.input_stall_s;
  if (a.storage_GBps < 0) throw Error("", "--storage-bw", "must be positive");
  setup.reliability.storage_Bps = a.storage_GBps * 1e9;
  if (a.mtbf_hours < 0) throw Error("", "--mtbf-hours", "must be positive");
  if (a.mtbf_hours > 0) setup.reliability.gpu_mtbf_hours = a.mtbf_hours;
  if (a.restart_s >= 0) setup.reliability.restart_s = a.restart_s;
  if (a.checkpoint_interval_s < 0) throw Error("", "--checkpoint-interval", "must be positive");
  setup.reliability.checkpoint_interval_s = a.checkpoint_interval_s;
  setup.profile = lent ? *lent->profile : calibration_for(*own, a.calibration);

  const auto r = simulate_training(topo, model, setup, lent ? lent->context : nullptr);
  TrainingRun run;
  run.model = model.name;
  run.cluster = std::filesystem::path(a.cluster.topology).stem().string();
  run.gpu = topo.gpu.model;
  run.kernel_model = ComputeModel(topo.gpu, setup.profile).describe();
  run.setup = &setup;
  run.gpu_bytes = topo.gpu.hbm_bytes.as_double();
  if (!fits_memory(r, run) && !a.allow_oom) {
    // Text: the verdict is the result (stdout, as `memory` prints it); JSON: stdout is the
    // document. Exit 3.
    if (a.cluster.json)
      cli_out() << json_text(does_not_fit_json(r, run)) << "\n";
    else
      cli_out() << does_not_fit_text(r, run);
    (a.cluster.json ? cli_err() : cli_out()) << does_not_fit_verdict(r, run);
    return 3;
  }
  if (!a.report.empty()) {
    HtmlReport rep;
    rep.title = "meshsim train: " + model.name + " on " + to_string(setup.config.mesh);
    rep.ranked.push_back(report_candidate(to_string(setup.config.mesh), setup.config.mesh.tp, r));
    rep.trace = &r.trace;
    rep.replay = &r.replay;
    rep.notes = r.notes;
    write_report(a.report, std::move(rep), topo, a.cluster.topology);
  }
  if (!a.trace.empty()) {
    write_output(a.trace, "--trace",
                 [&](std::ostream& out) { write_chrome_trace(r.trace, r.replay, out); });
  }
  if (a.cluster.json)
    cli_out() << json_text(training_run_json(r, run)) << "\n";
  else
    cli_out() << training_text(r, run);
  return 0;
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Simulate one training step of a mesh on a cluster");
  auto a = std::make_shared<TrainArgs>();
  a->cluster.add_to(cmd);
  a->job.add_to(cmd);
  cmd->add_option("--stage-layers", a->stage_layers,
                  "Layers per pipeline stage (pp × virtual entries), e.g. 7,8,8,7");
  cmd->add_flag("--tune-split", a->tune_split,
                "Set the stack's pipeline end switches to balance the stages, as search does "
                "(default: the stack's own split)");
  cmd->add_flag("--full", a->full, "Simulate every rank (default: one per stage, folded)");
  cmd->add_flag("--quiet", a->quiet, "No progress on stderr (--full)");
  cmd->add_flag("--allow-oom", a->allow_oom,
                "Report the step of a layout that does not fit memory (default: exit 3 with the "
                "memory verdict)");
  cmd->add_option("--trace", a->trace, "Write a Chrome/Perfetto trace (JSON)");
  cmd->add_option("--report", a->report, "Write an HTML report with plots");
  cmd->add_option("--rank-order", a->rank_order, "Innermost first (default tp-cp-dp-pp)");
  cmd->add_option("--cp-comm", a->job.cp_comm,
                  "Context parallel K/V: ring or allgather (default: the stack's, or the launch "
                  "configuration's)");
  cmd->add_option(
         "--bucket-mb", a->bucket_mb,
         "Gradient bucket in MiB (default: the stack's, e.g. Megatron max(40M, 1M × DP) params)")
      ->check(number_in(1e-6, 1e9));
  cmd->add_option("--expert-imbalance", a->expert_imbalance,
                  "Extra tokens on the busiest EP rank (0.2 = 20 % above the mean)")
      ->check(number_in(0, 1e3));
  cmd->add_option("--straggler", a->straggler, "RANK:FACTOR, a GPU computing FACTOR× slower");
  cmd->add_option(
      "--degrade-link", a->degrade_link,
      "VERTEX:FACTOR, every link at a vertex (e.g. n3/nic2) at FACTOR of its bandwidth");
  cmd->add_option("--input-stall", a->input_stall_s, "Data-loader stall per step (s)")
      ->check(number_in(0, 1e6));
  cmd->add_option("--storage-bw", a->storage_GBps,
                  "Checkpoint write bandwidth, GB/s aggregate (default 2 per node)")
      ->check(number_in(1e-6, 1e9));
  cmd->add_option("--mtbf-hours", a->mtbf_hours, "Per-GPU MTBF (default Llama 3's 50,700 h)")
      ->check(number_in(1e-3, 1e12));
  cmd->add_option("--restart-s", a->restart_s, "Restart time after a failure (default 600)")
      ->check(number_in(0, 1e9));
  cmd->add_option("--checkpoint-interval", a->checkpoint_interval_s,
                  "Seconds between checkpoints (default Young/Daly optimum)")
      ->check(number_in(1e-3, 1e12));
  cmd->add_option("--calibration", a->calibration, "Calibration profile (JSON)");
  return [a] { return run_train(*a); };
}

}  // namespace meshsim::cli
