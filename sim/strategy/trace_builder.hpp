#pragma once
// Builds the op graphs of a training step for a strategy: DDP / ZeRO-1/2/3 / FSDP2, Megatron TP
// with or without SP, pipeline schedules, CP (ring or all-gather of K/V), EP all-to-all,
// gradient accumulation, recomputation and the optimizer step.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "compute/compute_model.hpp"
#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "parallel/placement.hpp"
#include "stack/stack.hpp"
#include "strategy/comm_model.hpp"
#include "strategy/pipeline_split.hpp"
#include "strategy/trace.hpp"

namespace meshsim {

struct TrainingJob {
  std::int64_t seq = 0;
  std::int64_t global_batch = 0;  // sequences per step
  std::int64_t micro_batch = 1;
  DType dtype = DType::bf16;
  bool flash_attention = true;
  // The step's micro-batches run as this many pipeline schedules one after another, each of
  // micro-batches / pipeline_steps with its own fill and drain and its own gradient sync at its
  // last backward (torchtitan's gradient accumulation under PP: train.py runs
  // pp_schedule.step() once per local batch). 1: one schedule (Megatron-LM, DeepSpeed).
  std::int64_t pipeline_steps = 1;
};

struct StrategyOptions {
  // The software stack: kernels, TP overlap, interference, gradient dtype and buckets, optimizer.
  Stack stack = default_stack();
  std::optional<bool> tp_overlap;  // --tp-overlap: overrides the stack's default
  // Gradient bucket bytes; unset: the stack's bucket (Megatron-Core max(40 M, 1 M × DP) params).
  std::optional<double> bucket_bytes;
  // Token imbalance across EP ranks: the busiest rank's experts get (1 + imbalance)× the mean.
  double expert_imbalance = 0;
  // A straggler: compute on this rank runs `factor` times slower.
  std::optional<std::int32_t> straggler_rank;
  double straggler_factor = 1.0;
  // Layers per global model chunk (pp × virtual stages entries); empty: the stack's split
  // (framework_chunk_layers), balanced by time on a `balanced` stack.
  std::vector<std::int64_t> chunk_layers;
  // `search`: where chunk_layers is empty, the stack's end switches (PipelineSplit::end_switches)
  // set to balance the stages' estimated time (tuned_chunk_layers) instead of the stack's own
  // split; `train` runs the stack's own, as a launch without those switches would.
  bool tune_split = false;
  // With tune_split: where set, the tuned split is the least busy one that passes it
  // (simulate_training and the search's bound set it to the memory check, split_memory_check);
  // the stack's own split is kept where none better does.
  std::function<bool(const std::vector<std::int64_t>&)> split_fits;
};

// The other split a step's lower bound covers besides `chunk_layers` (the one the options
// chose): the even split for a `balanced` stack, which simulate_training runs when the balanced
// one does not fit memory; the stack's own for a tuned one (StrategyOptions::tune_split) chosen
// without the memory check (split_fits unset), since simulate_training makes its choice with it.
// Empty where there is none (a split given, one chunk, a framework's own split, a tuned one
// chosen with the check simulate_training sets, as the search's bound does).
std::vector<std::int64_t> fallback_split(const ModelSpec& model, const ParallelConfig& config,
                                         const StrategyOptions& options,
                                         const std::vector<std::int64_t>& chunk_layers);

// Micro-batches per step: global batch / (dp × micro-batch).
std::int64_t microbatches_per_step(const TrainingJob& job, const Mesh& mesh);

// Whether TP communication overlap runs: the stack has a method, it is on (by the stack or
// --tp-overlap), and sequence parallelism is on with tp > 1 (only AG/RS are overlapped).
bool tp_overlap_active(const StrategyOptions& options, const ParallelConfig& config);

// Gradient bucket bytes of a stack at data-parallel degree `dp` for a `dtype` job.
double stack_bucket_bytes(const Stack& stack, std::int64_t dp, DType dtype);

// A lower bound on the simulated step time of `config` that needs no collective priced: the
// pipeline schedule played out with every pass at the compute its trace puts on the compute
// stream (the kernels' uninterfered times), each rank's passes one after another in the
// schedule's order, each pass after the one it receives from (the previous chunk's forward, the
// next chunk's backward of the same micro-batch), then each rank's optimizer. The fill and drain
// are the schedule's own (interleaving, zero-bubble's deferred weight passes). Everything else
// (exposed communication, interference, idle time) only adds. The minimum over the split the
// options choose and fallback_split's, since simulate_training may fall back to it.
double step_time_lower_bound(const ModelSpec& model, const TrainingJob& job,
                             const ParallelConfig& config, const ComputeModel& cm,
                             const StrategyOptions& options);
// How much of the bound below to work out, cheapest first: a search raises a candidate one
// level at a time while it could still need simulating (evaluate_top_k).
enum class BoundLevel : std::uint8_t {
  chains,    // the first and last stages' layer passes as chains with their collectives
  unloaded,  // every stage's chains and the data-parallel streams, the data-parallel groups'
             // collectives at FoldedComm::unloaded_price (their one-copy lower bound)
  full,      // the same with every collective at its price
};

// The same, tighter: each layer's forward and backward pass on the first and last pipeline
// stages (on every stage from BoundLevel::unloaded on) counts in its rank's work as the
// longest chain of ops the trace gives it (engine/longest_chain.hpp), the collectives on it
// priced by `comm` as the replay will price them (the folded model with `placement`, the
// simulation's), so the TP, CP and EP collectives that the next kernel waits for count too. Valid
// because a pass's ops are emitted with exactly those dependencies among them, the passes of a rank
// are disjoint spans of its compute stream, and the replay only ever runs an op longer than its
// nominal duration (interference, link sharing). From BoundLevel::unloaded on, also the
// data-parallel streams (each runs its collectives one at a time): the step is at least ZeRO-3's
// all-gathers, at least the gradient reductions plus the optimizer (which waits for the last),
// and its last pass's reductions delay the optimizer past the compute. Those involve the widest
// groups, so a search asks for them only where the rest does not already decide, and at their
// prices (64 copies simulated each) only where their unloaded bounds do not. Every level is a
// lower bound; a higher one is never below a lower one (a price is never below its unloaded
// bound, and the bound only grows with the durations it is given).
double step_time_lower_bound(const ModelSpec& model, const TrainingJob& job,
                             const ParallelConfig& config, const Placement& placement,
                             const ComputeModel& cm, FoldedComm& comm,
                             const StrategyOptions& options, BoundLevel level = BoundLevel::full);

// The layers per model chunk build_trace gives `config`: the options' own split, a tuned one
// (StrategyOptions::tune_split, with split_fits where set), the stack's framework split or the
// one balanced by estimated time. What `memory --tune-split` reports without simulating.
std::vector<std::int64_t> trace_chunk_layers(const ModelSpec& model, const TrainingJob& job,
                                             const ParallelConfig& config, const ComputeModel& cm,
                                             const StrategyOptions& options);
// `ranks`: the ranks to simulate (every rank, or one representative per pipeline stage).
Trace build_trace(const ModelSpec& model, const TrainingJob& job, const ParallelConfig& config,
                  const Placement& placement, const ComputeModel& cm, CommModel& comm,
                  const StrategyOptions& options, const std::vector<std::int32_t>& ranks);

}  // namespace meshsim
