#pragma once
// The time of one kernel on one GPU from its FLOPs, bytes and shape and the GPU's kernel
// parameters (compute/kernel_params.hpp), before any measured-point correction:
//  - GEMM: (c^p + m^p)^(1/p) + fixed, a roofline softened by p, with compute time
//    c = FLOPs / (peak · fraction · occupancy · K/(K + k_half)) and memory time
//    m = bytes / (HBM · memory_fraction).
//    Occupancy is that of the best tile of a small menu a library would launch (128×256,
//    256×128, 128×128, 64×128, 128×64, 64×64): the useful share of the padded tiles, times the
//    busy share of the SMs under stream-K's hybrid schedule (Osama et al. 2023, cuBLAS and
//    CUTLASS): whole data-parallel waves, the last one or two waves' tiles split evenly along
//    the K loop over every SM — at every M and N, so there is no split-K cliff.
//  - Prefill attention: FLOPs / (16-bit peak · fraction · s_kv/(s_kv + kv_half) · occupancy),
//    occupancy with FlashDecoding-style split-KV when the query blocks do not fill the SMs, and
//    never less than the busiest SM's tile units × the per-tile time;
//    backward at backward_ratio of the forward efficiency. Never faster than its bytes.
//  - Decode attention (one query per sequence): fixed + per-sequence cost + KV bytes at the
//    decode bandwidth.
//  - Memory-bound: max(floor, fixed + (bytes − r) / (HBM · fraction) + r / (HBM · fraction ·
//    l2_speedup)) with the kernel class's numbers, where r, the traffic read from L2, is the
//    class's resident share of the bytes while they fit in half the GPU's L2, falling linearly
//    to 0 when they fill all of it (l2_resident_share; memory_kernel_seconds in the .cpp).
#include <array>
#include <cstdint>
#include <string>

#include "compute/kernel.hpp"
#include "compute/kernel_params.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

// Dense peak FLOP/s of `dtype` (FP32 GEMMs run as TF32); an Error when the GPU has none.
double peak_flops_of(const GpuSpec& gpu, DType dtype);
// Whether peak_flops_of has a peak for `dtype`, so the kernel model can price its GEMMs.
bool has_peak_flops(const GpuSpec& gpu, DType dtype);

// The GPU numbers the kernel model reads, with the peaks looked up once per dtype: the
// catalogue keeps them by name, and a price runs thousands of times per trace.
struct KernelGpu {
  explicit KernelGpu(const GpuSpec& gpu);
  // As peak_flops_of: an Error when the GPU has no peak for `dtype` (inline: every GEMM price
  // reads it).
  double peak_flops(DType dtype) const {
    const double p = peak[static_cast<std::size_t>(dtype)];
    if (p > 0) return p;
    no_peak(dtype);
  }
  [[noreturn]] void no_peak(DType dtype) const;

  std::string model;
  std::array<double, kAllDTypes.size()> peak{};  // by DType; 0: the GPU has none
  double hbm_Bps = 0;
  std::int32_t sm_count = 0;
  double l2_bytes = 0;  // 0: unknown, nothing is read from L2
};

// The share of a memory-bound kernel's traffic that it reads, and so may find in L2: its inputs
// were written by the kernels just before it. Assumption (named): norms, rotary (Q and K in
// place), softmax and KV appends read one tensor and write one: 1/2; a residual add reads two
// and writes one, the SwiGLU activation reads gate and up and writes one: 2/3; an embedding
// gathers rows of a table and the optimizer streams parameters, gradients and moments written a
// step before: 0. Vidur's measurements time each op alone and repeatedly on the same tensors, so
// all its inputs are as fresh as this says (../shared/measurements/README.md) and the fitted
// l2_speedup is how much that helps each class; in a training step a residual add's second
// input, the residual stream, was written a block earlier, so for mid-sized tensors this
// overstates the L2's help to adds.
double l2_resident_share(MemoryClass c);

// The GEMM fraction of the dtype's class: fp8, or 16-bit for everything else.
inline double gemm_fraction(const GemmParams& p, DType dtype) {
  return dtype == DType::fp8 ? p.fraction_fp8 : p.fraction_16bit;
}

// SMs another kernel holds while a kernel runs (a collective's CTAs beside it).
struct SmsTaken {
  std::int32_t count = 0;
  // true: the kernel was launched for every SM of the GPU (a library sizes its grid and its
  // stream-K split by the device's SM count) and runs on the SMs left, so a grid of one full
  // wave needs two rounds (the NVIDIA forum case of ../shared/reference/software-stacks.md
  // §2.2); false: it was launched for the SMs left (Transformer Engine's pipelined reduce-
  // scatter sets the GEMM's SM count target to SMs − num_sm, comm_gemm_overlap.cpp).
  bool planned_for_all = true;
  // With planned_for_all: SMs of `count` the library was told to leave out when it planned the
  // kernel (a userbuffers chunk GEMM planned for SMs − its own reduce-scatter's num_sm), the rest
  // arriving unseen at run time (another collective's NCCL kernels beside it). 0: none seen.
  std::int32_t seen = 0;
};

// Per tile of the menu: the useful share of its padded tiles times the share of SM time busy
// (of all `sm_count` SMs, whatever `taken` holds).
inline constexpr std::size_t kGemmTileMenu = 6;
using GemmTileUse = std::array<double, kGemmTileMenu>;
GemmTileUse gemm_tile_use(const GemmShape& shape, std::int32_t sm_count, SmsTaken taken = {});
// Useful fraction of the SMs' work for the best tile of the menu, with the per-tile efficiency
// I/(I + intensity_half) relative to 128×256.
double gemm_occupancy(const GemmTileUse& use, double intensity_half);
// The tile that is best by `chosen_by`, at its use in `runs_at`.
double gemm_occupancy(const GemmTileUse& chosen_by, const GemmTileUse& runs_at,
                      double intensity_half);
double gemm_occupancy(const GemmShape& shape, std::int32_t sm_count, double intensity_half,
                      SmsTaken taken = {});
// The GEMM roofline at a given occupancy.
double gemm_seconds(const Kernel& k, double occupancy, const KernelGpu& gpu, const GemmParams& p);

// One thread block per (sequence, head, query block); query blocks of 16–128 rows, the smallest
// power of two holding the queries; split-KV spreads a block's keys over idle SMs.
// The work of a fused attention kernel on the SMs: the useful share of their time, how many
// ways each block's keys are split, and the (query block × 128-key tile) units the busiest SM
// runs (causal blocks skip masked tiles).
struct AttentionWork {
  double occupancy = 1, splits = 1, units_per_sm = 0;
};
AttentionWork attention_work(const AttentionShape& shape, std::int32_t sm_count,
                             double split_min_keys);

double kernel_seconds(const Kernel& k, const KernelGpu& gpu, const KernelParams& p,
                      SmsTaken taken = {});
// For a one-off price: looks the peaks up again on every call (loops build one KernelGpu).
inline double kernel_seconds(const Kernel& k, const GpuSpec& gpu, const KernelParams& p,
                             SmsTaken taken = {}) {
  return kernel_seconds(k, KernelGpu(gpu), p, taken);
}

}  // namespace meshsim
