#pragma once
// One training step of a strategy on a cluster: the trace replayed on the engine, with compute
// from the compute model and collectives from the network model, and what a real run would
// report about it.
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compute/calibration_profile.hpp"
#include "engine/replay.hpp"
#include "memory/memory_model.hpp"
#include "model/model_spec.hpp"
#include "parallel/mesh_rules.hpp"
#include "parallel/placement.hpp"
#include "strategy/trace_builder.hpp"
#include "topology/topology.hpp"
#include "training/reliability.hpp"

namespace meshsim {

// What one layer's pass (forward and backward of one micro-batch on one simulated rank) costs in
// trace and replay memory. Measured: llama3.1-8b, seq 2048, 256 → 1,024 micro-batches on one DGX
// H100 (tp 8 folded; tp 2 pp 4 folded and --full; mixtral dp 8 ep 8) grows the peak RSS by 7.0–7.3
// KB per layer pass; rounded up.
inline constexpr double kTraceBytesPerLayerPass = 7.5e3;

struct TrainingSetup {
  TrainingJob job;
  ParallelConfig config;
  std::array<MeshDim, 4> rank_order{MeshDim::tp, MeshDim::cp, MeshDim::dp, MeshDim::pp};
  StrategyOptions strategy;
  MemoryOptions memory;
  ReliabilityOptions reliability;
  std::optional<CalibrationProfile> profile;
  bool full = false;         // simulate every rank (default: one per pipeline stage)
  double input_stall_s = 0;  // data-loader stall added to every step
  BatchSource batch_from;    // where job.global_batch came from, for its errors
  // Memory this simulation may plan for its trace; 0: memory_budget_bytes(). A search running
  // N simulations at once gives each 1/N.
  double memory_budget_bytes = 0;
  // Called with (ops replayed, all ops) as the step replays (the CLI's progress on --full).
  std::function<void(std::size_t, std::size_t)> progress;
};

// Where one rank's step time goes: compute, communication with nothing to overlap it (by group
// and by op), and idle time with no communication in flight (pipeline bubble, waiting for
// other ranks). compute + Σ exposed + bubble = step time.
struct RankBreakdown {
  std::int32_t rank = 0;
  std::int64_t stage = 0;
  double compute_s = 0, bubble_s = 0;
  // GPU idle while its next op waits for the host to launch it (only when the profile measures
  // the host's per-kernel time); not in bubble_s.
  double host_wait_s = 0;
  double interference_s = 0;  // of compute_s: compute slowed by collectives beside it
  // Collective time lost to HBM sharing with the kernels beside it, Σ dt·(1 − 1/D), and waited
  // for the SMs of a kernel that began before it was ready (engine/replay.hpp, late start)
  double comm_interference_s = 0;
  std::map<std::string, double> exposed_s, exposed_by_op_s, comm_bytes;
};

struct TrainingResult {
  double step_time_s = 0;
  double tokens_per_s = 0, tokens_per_s_per_gpu = 0;
  double model_flops_per_step = 0;
  double model_tflops_per_gpu = 0, mfu = 0, hfu = 0;
  double compute_s = 0, bubble_s = 0, bubble_fraction = 0;
  double host_wait_s = 0;          // GPU idle waiting for the host's launches (RankBreakdown's)
  double interference_s = 0;       // compute time lost to compute/communication interference
  double comm_interference_s = 0;  // collective time lost to HBM sharing and SM waits (ditto)
  std::string stack;               // the software stack's name
  bool tp_overlap = false;         // whether TP communication overlap ran
  std::string cp_comm;             // CP's K/V exchange, "ring" or "allgather"; empty at CP 1
  std::map<std::string, double> exposed_comm_s, exposed_comm_by_op_s, comm_bytes_per_gpu;
  std::vector<RankBreakdown> ranks;  // one per simulated rank
  MemoryBreakdown memory;
  std::vector<MemoryBreakdown> memory_per_stage;
  ReliabilityResult reliability;
  std::vector<std::int64_t> chunk_layers;
  // Where a search tuned the split with the stack's end switches (StrategyOptions::tune_split)
  // and it is not the stack's own: the note that says so and names the switches (also in notes).
  std::string tuned_split_note;
  std::int64_t microbatches = 0;
  std::int64_t gpus = 0;
  std::vector<std::string> notes;  // flagged conditions (TP across nodes, ...)
  std::size_t simulated_ranks = 0, ops = 0;
  Trace trace;
  ReplayResult replay;
};

// Memory per pipeline stage of `setup`'s job run with `chunk_layers` layers per chunk (the
// memory model with the setup's options, fused attention as the job says).
std::vector<MemoryBreakdown> setup_memory_per_stage(const ModelSpec& model,
                                                    const TrainingSetup& setup,
                                                    const std::vector<std::int64_t>& chunk_layers);

// StrategyOptions::split_fits for `setup` on GPUs of `capacity_bytes`: the worst stage fits. The
// check refers to `model` and `setup`, which must outlive it.
std::function<bool(const std::vector<std::int64_t>&)> split_memory_check(const ModelSpec& model,
                                                                         const TrainingSetup& setup,
                                                                         double capacity_bytes);

// Checks the mesh against the model, job and cluster (one precise Error per broken rule) and
// runs the step.
// `context` (optional) carries routes and prices over from earlier simulations on this cluster
// in the same thread.
TrainingResult simulate_training(const Topology& topo, const ModelSpec& model,
                                 const TrainingSetup& setup, CommContext* context = nullptr);

// compute / exposed / bubble of one rank from the replay; `ops` are that rank's op indices.
RankBreakdown breakdown_of(const Trace& trace, const ReplayResult& replay, std::int32_t rank,
                           const std::vector<std::uint32_t>& ops, Time step_end);

}  // namespace meshsim
