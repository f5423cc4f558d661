#pragma once
// Beyond one step: checkpoint time, and the fraction of wall time a long run spends on useful
// steps given failures (first-order Young/Daly model).
#include <cstdint>

namespace meshsim {

struct ReliabilityOptions {
  // Aggregate checkpoint write bandwidth of the storage system, B/s; 0 means the assumed 2 GB/s
  // per node (a storage NIC of 200 Gb/s sustaining a third of its line rate); set it to your
  // file system's measured write rate.
  double storage_Bps = 0;
  // Per-GPU mean time between job-interrupting failures. Llama 3 (Dubey et al. 2024, §3.3.4):
  // 419 unexpected interruptions in 54 days on 16,384 GPUs, a job MTBF of 3.09 h, so
  // 3.09 h × 16,384 ≈ 50,700 GPU-hours.
  double gpu_mtbf_hours = 54.0 * 24.0 / 419.0 * 16384.0;
  double restart_s = 600;            // assumed: reschedule, reload the checkpoint, warm up
  double checkpoint_interval_s = 0;  // 0: Young/Daly optimum √(2 · checkpoint · MTBF)
};

struct ReliabilityResult {
  double checkpoint_bytes = 0;
  double checkpoint_s = 0;
  double job_mtbf_s = 0;
  double checkpoint_interval_s = 0;
  double goodput_fraction = 0;
};

// `state_bytes`: the whole model state written per checkpoint (weights, master weights,
// optimizer moments), spread over every rank's shard.
ReliabilityResult project_reliability(double state_bytes, std::int64_t gpus, std::int64_t nodes,
                                      const ReliabilityOptions& o);

}  // namespace meshsim
