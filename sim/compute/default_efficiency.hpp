#pragma once
// What fraction of a GPU's peak a kernel reaches when no calibration profile says otherwise.
// The constants come from published single-GPU microbenchmarks (validation/hardware.md C2, the
// Azure AI-benchmarking-guide), never from end-to-end training numbers.
#include <map>
#include <string>

#include "compute/dtype.hpp"
#include "compute/kernel.hpp"
#include "core/units.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

struct DefaultEfficiency {
  // Fraction of dense peak a large, well-shaped GEMM reaches, per dtype.
  std::map<DType, double> gemm_peak_fraction;
  // A GEMM's efficiency ramps with K as K/(K + k_ramp): prologue and epilogue of each output tile
  // are paid once per tile whatever K is.
  double gemm_k_ramp = 0;
  // Fused attention forward/backward, fraction of dense peak at a large shape.
  double attention_peak_fraction = 0;
  // Achievable fraction of HBM bandwidth for streaming kernels (STREAM triad / spec).
  double memory_bandwidth_fraction = 0;
  // Fixed cost per kernel on the GPU (launch and tail), paid by every kernel.
  Time launch_overhead;
  // Tile edge (M and N) used for tile and wave quantization.
  std::int64_t tile = 128;
  bool generic = false;  // no microbenchmark for this GPU: Hopper-class fractions are used
  std::string source;
};

DefaultEfficiency default_efficiency(const GpuSpec& gpu);

// Tile and wave quantization of a GEMM (reference/network-model.md): the useful fraction of the
// work the SMs do when the output is cut into tile×tile blocks and the blocks run in waves of
// `sm_count`: M·N·batch / (waves · sm_count · tile²). A skinny GEMM under one wave of tiles has
// its K loop split over the idle SMs (split-K / stream-K): busy SMs × the split count.
double gemm_quantization(const GemmShape& shape, std::int64_t tile, std::int64_t sm_count);

// The same for attention: one thread block per (sequence, head, 128-query block).
double attention_quantization(const AttentionShape& shape, std::int64_t tile,
                              std::int64_t sm_count);

}  // namespace meshsim
