#pragma once
// The divisibility rules a mesh must satisfy for a model and job, each with a precise error.
#include <cstdint>
#include <string>

#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"

namespace meshsim {

// Where a job's global batch came from, as its errors name it: the --gbs flag or the dp ×
// micro-batch default ({"", "--gbs"}), a job file ({file, "/global_batch", " (--gbs overrides
// it)"}) or a launch configuration ({"", its file or --from-megatron, " (its batch key)"}).
struct BatchSource {
  std::string file;             // Error's file; empty: a flag
  std::string field = "--gbs";  // Error's path
  std::string note;             // appended to the message
};

struct MeshJob {
  std::int64_t seq = 0;           // 0: not checked
  std::int64_t global_batch = 0;  // 0: not checked
  std::int64_t micro_batch = 1;
  bool causal = true;
  BatchSource batch_from;
  // Pipeline schedules per step (TrainingJob::pipeline_steps); named by `steps_field`.
  std::int64_t pipeline_steps = 1;
  std::string steps_field = "--pipeline-steps";
};

// Micro-batches per step a simulation takes (each is simulated op by op; 8,192 is far above any
// published run's count per data-parallel rank, and keeps a step's op graph within memory).
inline constexpr std::int64_t kMaxMicrobatches = 8192;

// Throws Error("", "--mesh" or the job flag, what) for the first rule broken (a batch error names
// job.batch_from: Error(file, field, what + note)):
// heads % tp; KV heads vs tp (divisible either way); pp × virtual stages ≤ layers; experts % ep;
// MoE with tp > 1 needs sequence parallelism; seq % (2·cp) for causal load balancing (seq % cp
// otherwise); global batch % (dp × micro-batch); at most kMaxMicrobatches micro-batches;
// pipeline steps > 1 only with pp > 1, dividing the micro-batches per step.
void check_mesh(const ModelSpec& model, const ParallelConfig& config, const MeshJob& job);

}  // namespace meshsim
