#pragma once
// The divisibility rules a mesh must satisfy for a model and job, each with a precise error.
#include <cstdint>
#include <string>

#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"

namespace meshsim {

struct MeshJob {
  std::int64_t seq = 0;           // 0: not checked
  std::int64_t global_batch = 0;  // 0: not checked
  std::int64_t micro_batch = 1;
  bool causal = true;
  // The job file the global batch came from (its errors name the file's /global_batch); empty:
  // the --gbs flag or the dp × micro-batch default.
  std::string batch_file;
};

// Micro-batches per step a simulation takes (each is simulated op by op; 8,192 is far above any
// published run's count per data-parallel rank, and keeps a step's op graph within memory).
inline constexpr std::int64_t kMaxMicrobatches = 8192;

// Throws Error("", "--mesh" or the job flag, what) for the first rule broken (a batch from a job
// file: Error(file, "/global_batch", what)):
// heads % tp; KV heads vs tp (divisible either way); pp × virtual stages ≤ layers; experts % ep;
// MoE with tp > 1 needs sequence parallelism; seq % (2·cp) for causal load balancing (seq % cp
// otherwise); global batch % (dp × micro-batch); at most kMaxMicrobatches micro-batches.
void check_mesh(const ModelSpec& model, const ParallelConfig& config, const MeshJob& job);

}  // namespace meshsim
