#pragma once
// The time of one kernel on one GPU from its FLOPs, bytes and shape and the GPU's kernel
// parameters (compute/kernel_params.hpp), before any measured-point correction:
//  - GEMM: max(FLOPs / (peak · fraction · occupancy · K/(K + k_half)),
//              bytes / (HBM · memory_fraction)) + fixed.
//    Occupancy is that of the best tile of a small menu a library would launch (128×256,
//    256×128, 128×128, 64×128, 128×64, 64×64): the useful share of the padded tiles, times
//    whole-wave quantization when there are at least as many tiles as SMs, or stream-K's even
//    split of the K loop over all SMs when there are fewer (Osama et al. 2023, cuBLAS and
//    CUTLASS on Hopper) — at every M and N, so there is no split-K cliff.
//  - Prefill attention: FLOPs / (16-bit peak · fraction · s_kv/(s_kv + kv_half) · occupancy),
//    occupancy with FlashDecoding-style split-KV when the query blocks do not fill the SMs, and
//    never less than the busiest SM's tile units × the per-tile time;
//    backward at backward_ratio of the forward efficiency. Never faster than its bytes.
//  - Decode attention (one query per sequence): fixed + per-sequence cost + KV bytes at the
//    decode bandwidth.
//  - Memory-bound: max(floor, fixed + bytes / (HBM · fraction)) with the kernel class's numbers.
#include <array>
#include <cstdint>

#include "compute/kernel.hpp"
#include "compute/kernel_params.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

// Dense peak FLOP/s of `dtype` (FP32 GEMMs run as TF32); an Error when the GPU has none.
double peak_flops_of(const GpuSpec& gpu, DType dtype);

// The GEMM fraction of the dtype's class: fp8, or 16-bit for everything else.
double gemm_fraction(const GemmParams& p, DType dtype);

// Per tile of the menu: the useful share of its padded tiles times the share of SM time busy.
inline constexpr std::size_t kGemmTileMenu = 6;
using GemmTileUse = std::array<double, kGemmTileMenu>;
GemmTileUse gemm_tile_use(const GemmShape& shape, std::int32_t sm_count);
// Useful fraction of the SMs' work for the best tile of the menu, with the per-tile efficiency
// I/(I + intensity_half) relative to 128×256.
double gemm_occupancy(const GemmTileUse& use, double intensity_half);
double gemm_occupancy(const GemmShape& shape, std::int32_t sm_count, double intensity_half);
// The GEMM roofline at a given occupancy.
double gemm_seconds(const Kernel& k, double occupancy, const GpuSpec& gpu, const GemmParams& p);

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

double kernel_seconds(const Kernel& k, const GpuSpec& gpu, const KernelParams& p);

}  // namespace meshsim
