#pragma once
// The few numbers that price every kernel on one GPU (compute/kernel_time.hpp). They are fitted
// to measured kernels by `meshsim calibrate fit` (compute/kernel_fit.hpp): the bundled H100 and
// A100 profiles hold the fits to Vidur's published per-operator measurements
// (../shared/measurements, converted by tools/convert_vidur.py), a user's profile holds the fit
// to their own harness output. Fractions are of the GPU's specification (peak FLOP/s, HBM
// bandwidth), so a GPU without measurements takes another GPU's fractions with its own specs.
#include <array>
#include <string>

#include "compute/dtype.hpp"
#include "compute/kernel.hpp"
#include "core/json_reader.hpp"

namespace meshsim {

struct GemmParams {
  // Fraction of dense peak a large, well-shaped GEMM reaches: 16-bit (bf16, fp16 and TF32 are
  // one class) and FP8.
  double fraction_16bit = 0.75;
  double fraction_fp8 = 0.68;
  // Efficiency × K/(K + k_half): prologue/epilogue of each output tile against its K loop.
  double k_half = 64;
  // Per-tile efficiency I/(I + intensity_half) relative to a 128×256 tile, with the tile's
  // operand reuse I = tm·tn/(tm + tn): small tiles feed the tensor cores less well.
  double intensity_half = 16;
  // Fraction of HBM bandwidth a GEMM streams its operands at (the decode-sized GEMMs).
  double memory_fraction = 0.85;
  // Compute and memory time overlap imperfectly: t = (c^p + m^p)^(1/p) (p → ∞ is the ideal
  // roofline max(c, m)); p is fitted, so mid-sized GEMMs near the ridge point are not priced at
  // the better of the two bounds.
  double sharpness = 4;
  double fixed_s = 3e-6;  // per kernel: launch, prologue, tail
};

struct MemoryClassParams {
  double bandwidth_fraction = 0.887;  // of HBM bandwidth
  double fixed_s = 2e-6;
  double floor_s = 2e-6;  // the shortest such kernel
  // How much faster the kernel reads the part of its traffic that is still in L2 (its inputs,
  // written by the kernels before it) than it streams from HBM; 1: no faster
  // (compute/kernel_time.hpp, l2_resident_share).
  double l2_speedup = 1;
};

struct AttentionParams {
  // Fused prefill attention: fraction of 16-bit peak at long keys, reached as
  // s_kv/(s_kv + kv_half): short keys leave each query block's pipeline mostly prologue.
  double fraction = 0.33;
  double kv_half = 256;
  // The shortest time an SM spends on one unit of work (a query block against one 128-key
  // tile): loading the K/V tile bounds a small query block, whatever its FLOPs.
  double tile_s = 0.1e-6;
  // Split-KV cuts a query block's keys into chunks of at least this many keys (the library's
  // split heuristic: short contexts are not split).
  double split_min_keys = 1024;
  double fixed_s = 5e-6;
  // Backward efficiency relative to forward. Assumption (named): FlashAttention-2 reaches "up to
  // 73 % of the theoretical maximum FLOPs/s" forward and "up to 63 %" backward on A100 (Dao
  // 2023, §4.1), so backward runs at 63/73 of the forward efficiency; the forward anchor is the
  // FlashAttention-2 row of ../shared/validation/hardware.md C2.
  double backward_ratio = 63.0 / 73.0;
};

struct DecodeParams {
  // One decode step's attention over a paged KV cache (FlashDecoding-style split-KV):
  // fixed + per_sequence · batch + KV bytes / (HBM · bandwidth_fraction).
  double bandwidth_fraction = 0.8;
  double fixed_s = 8e-6;
  double per_sequence_s = 0.1e-6;
};

struct KernelParams {
  GemmParams gemm;
  std::array<MemoryClassParams, kMemoryClassCount> memory{};
  AttentionParams attention;
  DecodeParams decode;

  const MemoryClassParams& of(MemoryClass c) const { return memory[static_cast<std::size_t>(c)]; }
  MemoryClassParams& of(MemoryClass c) { return memory[static_cast<std::size_t>(c)]; }
};

// The prior every fit starts from and every unfitted part falls back to: spec-level numbers
// from ../shared/validation/hardware.md C2 (Azure microbenchmarks on H100: STREAM triad
// 2.97 of 3.35 TB/s, FlashAttention-2 327.9 of 989 TFLOP/s) and reference/network-model.md
// ("large bf16 GEMMs typically reach 70–80 % of peak").
KernelParams generic_kernel_params();

// A profile's `model` section: {gemm?, memory?: {class: {...}}, attention?, decode?}, each part
// and each key optional, laid over `base`. Strict: unknown keys and out-of-range values fail.
KernelParams read_kernel_params(const JsonRef& ref, KernelParams base);

Json to_json(const GemmParams& p);
Json to_json(const MemoryClassParams& p);
Json to_json(const AttentionParams& p);
Json to_json(const DecodeParams& p);
Json to_json(const KernelParams& p);

}  // namespace meshsim
