#pragma once
// The job flags `memory`, `train` and `search` share: workload, mesh, ZeRO stage, recompute,
// sequence and batch, dtype, SP, schedule, attention kernel.
#include <CLI/CLI.hpp>
#include <functional>
#include <ostream>
#include <string>

#include "compute/calibration_profile.hpp"
#include "compute/dtype.hpp"
#include "core/json_reader.hpp"
#include "memory/memory_model.hpp"
#include "model/workload.hpp"
#include "parallel/parallel_config.hpp"
#include "report/html_report.hpp"
#include "report/launch_config.hpp"
#include "report/metrics_json.hpp"
#include "report/report_candidate.hpp"
#include "topology/topology.hpp"
#include "training/training_sim.hpp"

namespace meshsim::cli {

bool on_off(const std::string& value, const std::string& flag);
EpDispatch ep_dispatch_flag(const std::string& value, const std::string& flag);
CpComm cp_comm_flag(const std::string& value, const std::string& flag);
DType dtype_flag(const std::string& value, const std::string& flag);
// Writes an output file: a path that cannot be opened is bad input (Error naming `flag`); bytes
// that do not reach it (a full disk) a WriteError naming the path, checked after flush and close.
void write_output(const std::string& path, const std::string& flag,
                  const std::function<void(std::ostream&)>& write);

// "7,8,8,7" → {7, 8, 8, 7}: positive integers up to `max`; otherwise Error("", flag,
// "'TEXT': expected WHAT").
std::vector<std::int64_t> parse_count_list(const std::string& text, const std::string& flag,
                                           const std::string& what, std::int64_t max);
// --stage-layers "7,8,8,7" (train and memory): layers per pipeline chunk.
std::vector<std::int64_t> parse_stage_layers(const std::string& text);

// Writes `report` (title and rows already set) for `topo` to `path`, with the command line.
void write_report(const std::string& path, HtmlReport report, const Topology& topo,
                  const std::string& cluster_file);

// The calibration profile of a run: `--calibration` if given, else the one the cluster file
// names, else none. Its point-to-point link fits rescale `topo`'s links (said on stderr); its
// GEMM, attention and collective fits are used by the simulation.
std::optional<CalibrationProfile> calibration_for(Topology& topo, const std::string& flag);

// The GPU of `--gpu NAME` (a catalogue name; H100-SXM5-80GB when neither is given) or of
// `--topology T [--nodes N]`, with the cluster when one was given.
struct ResolvedGpu {
  GpuSpec gpu;
  std::optional<Topology> topology;
};
ResolvedGpu resolve_gpu(const std::string& gpu, const std::string& topology, std::int32_t nodes);

struct JobArgs {
  std::string workload, mesh;
  std::int32_t zero = 0;
  std::string recompute, dtype, sp, schedule = "1f1b", attention = "flash", reshard = "on",
                                    tp_overlap, ep_dispatch;
  // --cp-comm (train registers it; memory does not depend on it): overrides the stack's and a
  // launch configuration's CP exchange. Empty: theirs.
  std::string cp_comm;
  // --recompute-modules a,b: the stack's modules recomputed selectively (a launch line's
  // --recompute-modules likewise). Empty: the --recompute policy.
  std::vector<std::string> recompute_modules;
  // --recompute-method uniform|block with --recompute-num-layers N (full recompute only).
  std::string recompute_method;
  std::int64_t recompute_layers = 0;
  // Empty: what a launch configuration says (--from-torchtitan: torchtitan or torchtitan-compile),
  // else megatron.
  std::string stack;
  std::string seq;  // tokens, with K/M suffixes ("8k"); empty: the job file's
  // A Megatron-LM launch line (or script) giving the mesh, ZeRO stage, recompute, schedule, SP,
  // batch, sequence and precision instead of the flags (sim/report/megatron_line.hpp).
  std::string from_megatron;
  std::string from_torchtitan;  // a torchtitan job config (TOML) likewise
  std::int64_t gbs = 0, mbs = 0;
  std::int64_t pipeline_steps = 1;  // --pipeline-steps (TrainingJob::pipeline_steps)

  void add_to(CLI::App* cmd);

  struct Resolved {
    Workload workload;
    ParallelConfig config;
    std::int64_t seq = 0, global_batch = 0, micro_batch = 1;
    std::int64_t pipeline_steps = 1;
    BatchSource batch_from;  // where global_batch came from, for its errors
    DType dtype = DType::bf16;
    bool flash_attention = true;
    Stack stack;
    std::optional<bool> tp_overlap;
    // Layers per pipeline chunk a launch configuration fixes; empty: the stack's split.
    std::vector<std::int64_t> chunk_layers;
  };
  // Loads the workload and applies the flags over the job file's values. The global batch
  // defaults to dp × micro-batch (one micro-batch per replica) when neither gives it. A mesh
  // without dp takes the data-parallel degree that fills `world` GPUs (the cluster's; 0: none
  // known, dp = 1). With --from-megatron the line gives the layout and job (dp from `world`,
  // which must then be known), and its architecture flags must match the workload's model.
  Resolved resolve(std::int64_t world = 0) const;

 private:
  // The layout and job of --from-megatron / --from-torchtitan on `world` GPUs, checked against
  // `model`; the flag given.
  LaunchLayout launch_layout(const ModelSpec& model, std::int64_t world,
                             bool reshard_after_forward) const;
  std::string launch_flag() const;
  // What a launch configuration's errors name: its file (a TOML, a Megatron script), or the flag
  // when the Megatron line was given in quotes.
  std::string launch_source() const;
};

// A training setup with the job, the parallel config and the dtype's precision recipe set; the
// rest at its defaults.
TrainingSetup training_setup(const JobArgs::Resolved& job);

}  // namespace meshsim::cli
