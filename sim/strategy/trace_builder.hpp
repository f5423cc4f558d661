#pragma once
// Builds the op graphs of a training step for a strategy: DDP / ZeRO-1/2/3 / FSDP2, Megatron TP
// with or without SP, pipeline schedules, CP (ring or all-gather of K/V), EP all-to-all,
// gradient accumulation, recomputation and the optimizer step.
#include <cstdint>
#include <optional>
#include <vector>

#include "compute/compute_model.hpp"
#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "parallel/placement.hpp"
#include "strategy/comm_model.hpp"
#include "strategy/trace.hpp"

namespace meshsim {

struct TrainingJob {
  std::int64_t seq = 0;
  std::int64_t global_batch = 0;  // sequences per step
  std::int64_t micro_batch = 1;
  DType dtype = DType::bf16;
  bool flash_attention = true;
};

enum class CpComm : std::uint8_t { ring, all_gather };

struct StrategyOptions {
  // PyTorch DDP's bucket_cap_mb default (25 MiB); Megatron-LM's default bucket is 40M elements
  // (80 MB in bf16), settable here.
  double bucket_bytes = 25.0 * 1024 * 1024;
  CpComm cp_comm = CpComm::ring;
  // Token imbalance across EP ranks: the busiest rank's experts get (1 + imbalance)× the mean.
  double expert_imbalance = 0;
  // A straggler: compute on this rank runs `factor` times slower.
  std::optional<std::int32_t> straggler_rank;
  double straggler_factor = 1.0;
  // Layers per global model chunk (pp × virtual stages entries); empty: balanced by time.
  std::vector<std::int64_t> chunk_layers;
};

// Micro-batches per step: global batch / (dp × micro-batch).
std::int64_t microbatches_per_step(const TrainingJob& job, const Mesh& mesh);

// Layers per chunk balancing estimated compute time: the first chunk also runs the embedding,
// the last the logits and loss (Narayanan et al. note the unequal ends; the seed guide advises
// balancing stages by time and memory). Contiguous chunks minimising the slowest one.
std::vector<std::int64_t> balanced_chunks(std::int64_t layers, std::int64_t chunks, double layer_s,
                                          double first_extra_s, double last_extra_s);

// `ranks`: the ranks to simulate (every rank, or one representative per pipeline stage).
Trace build_trace(const ModelSpec& model, const TrainingJob& job, const ParallelConfig& config,
                  const Placement& placement, const ComputeModel& cm, CommModel& comm,
                  const StrategyOptions& options, const std::vector<std::int32_t>& ranks);

}  // namespace meshsim
