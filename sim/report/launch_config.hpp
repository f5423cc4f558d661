#pragma once
// A training layout as the launch configuration a user pastes: Megatron-LM arguments, a
// torchtitan [parallelism] TOML section, an Accelerate FSDP2 YAML, or a torchrun line.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compute/dtype.hpp"
#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "serving/scheduler.hpp"
#include "serving/step_cost.hpp"
#include "stack/stack.hpp"

namespace meshsim {

struct LaunchJob {
  std::int64_t seq = 0, global_batch = 0, micro_batch = 1;
  DType dtype = DType::bf16;
  std::int64_t nodes = 1, gpus_per_node = 8;
  // Pipeline schedules per step (TrainingJob::pipeline_steps): torchtitan's gradient-accumulation
  // steps under PP, global / (local batch × dp); 1 for Megatron-LM.
  std::int64_t pipeline_steps = 1;
};

// What a launch configuration says of the software stack that runs it: the stack's name (empty:
// not said), TP communication overlap asked for (Megatron --tp-comm-overlap, torchtitan async TP;
// false: the stack's default, off in every bundled stack) and a fused loss (Megatron
// --cross-entropy-loss-fusion, torchtitan's compiled loss) and DeepEP's dispatcher (Megatron
// --moe-token-dispatcher-type flex --moe-enable-deepep).
struct LaunchStack {
  std::string name;
  bool tp_overlap = false;
  bool fused_loss = false;
  bool deepep = false;
  // CP's K/V exchange: what a launch configuration says (or its framework's default, the
  // `megatron` and `torchtitan` stacks' own), or what to write into one. Unset: not said.
  std::optional<CpComm> cp_comm;
  // FP8 runs: torchtitan's [float8] enable_fsdp_float8_all_gather and
  // precompute_float8_dynamic_scale_for_fsdp (Stack::fp8_fsdp_all_gather). Unset: not said
  // (the stack's own).
  std::optional<Fp8FsdpAllGather> fp8_fsdp_all_gather;
  // FP8 runs: Megatron-LM's --fp8-param-gather (Stack::fp8_params).
  bool fp8_params = false;
  // How the framework splits the layers (Stack::pipeline_split): Megatron's
  // --account-for-embedding/loss-in-pipeline-split, torchtitan's
  // pipeline_parallel_first/last_stage_less_layers. Unset: not said (the stack's own).
  std::optional<PipelineSplit> pipeline_split;
  // The layers per chunk simulated (TrainingResult::chunk_layers), written with the framework's
  // switches where they say it (a search's tuned split: Megatron's account flags or
  // --decoder-first/last-pipeline-num-layers, torchtitan's ends' weights), else a "# " line.
  // Empty: the split above.
  std::vector<std::int64_t> chunk_layers;
};

// A launch configuration read back (report/megatron_line.hpp, report/torchtitan_config.hpp).
struct LaunchLayout {
  ParallelConfig config;
  LaunchJob job;  // seq 0 / global_batch 0: not given (the job file's or dp × mbs)
  LaunchStack stack;
  // Layers per global model chunk the configuration fixes (Megatron's
  // --decoder-first/last-pipeline-num-layers); empty: the stack's split.
  std::vector<std::int64_t> chunk_layers;
};

// torchtitan's (model name, flavor) of a bundled model ({"llama3", "70B"}), or empty ones.
std::pair<std::string, std::string> torchtitan_flavor(const ModelSpec& model);

// CP's K/V exchange as the frameworks name it, for their launch configurations (written and read
// back): Megatron-LM's --cp-comm-type, passed to Transformer Engine ("p2p", its default ring, or
// "all_gather"), and torchtitan's context_parallel_rotate_method ("alltoall", which passes the
// shards rank to rank, a ring, or "allgather", its default).
// PyTorch's ScheduleInterleaved1F1B runs n micro-batches in max(1, n // pp) rounds of n / rounds
// (torch.distributed.pipelining: number_of_rounds, microbatches_per_round; refused unless the
// rounds divide n), each virtual stage taking a round's micro-batches in turn: Megatron's
// micro-batch group of that size. 0: pp, the default group (also for n ≤ pp); nothing: refused.
std::optional<std::int64_t> torchtitan_interleaved_group(std::int64_t n, std::int64_t pp);

std::string_view megatron_cp_comm_type(CpComm comm);
std::string_view torchtitan_rotate_method(CpComm comm);

// format: megatron, torchtitan, accelerate, torchrun. Throws Error("", "--emit", ...) otherwise.
// `stack`: the stack simulated, written as the framework's switches (Megatron's
// --tp-comm-overlap and --cross-entropy-loss-fusion; torchtitan's [compile] for
// torchtitan-compile and async TP), so that reading the text back runs the same stack.
std::string launch_config(const std::string& format, const ModelSpec& model,
                          const ParallelConfig& config, const LaunchJob& job,
                          const LaunchStack& stack = {});

// A serving layout as engine launch lines: one `vllm serve` per replica (pinned to its GPUs,
// one port each, behind any HTTP load balancer), or one SGLang server with --dp-size replicas
// (SGLang routes between them itself). format: vllm, sglang.
std::string serving_launch_config(const std::string& format, const ModelSpec& model,
                                  const ReplicaShape& shape, std::int64_t replicas,
                                  const SchedulerOptions& scheduler);

}  // namespace meshsim
