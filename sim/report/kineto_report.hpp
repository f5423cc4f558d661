#pragma once
// What `meshsim calibrate kineto` prints: a PyTorch profiler trace of real steps read as time per
// part (compute kernels by kind, each NCCL collective), side by side with the simulated step of
// the same job; the trace's GEMM shapes with their measured and modelled times; the host's time
// per kernel launch. As text or as one JSON document.
#include <optional>
#include <string>
#include <vector>

#include "compute/compute_model.hpp"
#include "compute/kineto_trace.hpp"
#include "core/json_reader.hpp"
#include "parallel/mesh.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

struct KinetoComparison {
  std::string trace;  // the trace file as given
  const KinetoSummary* measured = nullptr;
  // The same job simulated: its cluster's name, layout and result, and the kernel model that
  // prices the trace's GEMM shapes.
  std::string cluster;
  Mesh mesh;
  const TrainingResult* simulated = nullptr;
  const ComputeModel* kernels = nullptr;
};

// One row of the per-step table: what the trace measured and what the simulation gives for the
// same part (none where the simulation has no such part: the wall step without ProfilerStep#, or
// the compute kinds it does not split).
struct KinetoPart {
  std::string part;
  double measured_s = 0;
  std::optional<double> simulated_s;
};

// Rank 0's busy time per part, as the profiler sees kernels: compute ops and the whole duration
// of each collective (not only its exposed part).
std::vector<KinetoPart> kineto_parts(const KinetoComparison& c);

std::string kineto_text(const KinetoComparison& c);
// {"trace", "device", "kernels", "steps", "simulated": {"topology", "mesh"}, "parts": [{"part",
//  "measured_s", "simulated_s", "error"}], "gemm": [{"dtype", "m", "n", "k", "batch",
//  "measured_s", "flops_per_s", "model_s"}], "host_per_kernel_s", "launch_call_s"}
Json kineto_json(const KinetoComparison& c);

}  // namespace meshsim
