#include "compute/kernel_time.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.hpp"

namespace meshsim {
namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// A tile's operand reuse: MACs per element loaded, tm·tn/(tm + tn).
double intensity(double tm, double tn) {
  return tm * tn / (tm + tn);
}

struct Tile {
  double m, n;
};
constexpr std::array<Tile, 6> kTiles{
    {{128, 256}, {256, 128}, {128, 128}, {64, 128}, {128, 64}, {64, 64}}};
constexpr double kTileK = 64;  // K depth of one main-loop iteration (the stream-K work unit)

// Units of `per_sm`-sized work spread over `sms` SMs: the busiest SM sets the time.
double spread(double units, double sms) {
  return units / (ceil_div(units, sms) * sms);
}

// (a^p + b^p)^(1/p), computed without overflow: max · (1 + (min/max)^p)^(1/p).
double soft_max(double a, double b, double p) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  if (hi <= 0) return 0;
  return hi * std::pow(1.0 + std::pow(lo / hi, p), 1.0 / p);
}

}  // namespace

double peak_flops_of(const GpuSpec& gpu, DType dtype) {
  const auto it = gpu.peak_flops.find(std::string(name_of(dtype)));
  if (it != gpu.peak_flops.end()) return it->second;
  // FP32 GEMMs in training run on tensor cores as TF32 (PyTorch allow_tf32 for matmul).
  if (dtype == DType::fp32)
    if (auto tf = gpu.peak_flops.find("tf32"); tf != gpu.peak_flops.end()) return tf->second;
  throw Error(gpu.model, "peak_flops",
              "this GPU has no " + std::string(name_of(dtype)) + " tensor-core peak");
}

double gemm_fraction(const GemmParams& p, DType dtype) {
  return dtype == DType::fp8 ? p.fraction_fp8 : p.fraction_16bit;
}

GemmTileUse gemm_tile_use(const GemmShape& s, std::int32_t sm_count) {
  GemmTileUse use{};
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) {
    use.fill(1.0);
    return use;
  }
  const double M = static_cast<double>(s.m), N = static_cast<double>(s.n),
               K = static_cast<double>(s.k), B = static_cast<double>(s.batch),
               sms = static_cast<double>(sm_count);
  for (std::size_t i = 0; i < kTiles.size(); ++i) {
    const auto& t = kTiles[i];
    const double tiles = ceil_div(M, t.m) * ceil_div(N, t.n) * B;
    const double padding = M * N * B / (tiles * t.m * t.n);
    // Whole waves of output tiles, or (fewer tiles than SMs) stream-K: every SM takes an even
    // share of the tiles' K iterations, so a partial wave never idles SMs for a whole tile.
    const double busy =
        tiles >= sms ? spread(tiles, sms) : spread(tiles * ceil_div(K, kTileK), sms);
    use[i] = padding * busy;
  }
  return use;
}

double gemm_occupancy(const GemmTileUse& use, double intensity_half) {
  const double best_reuse = intensity(128, 256) / (intensity(128, 256) + intensity_half);
  double best = 0;
  for (std::size_t i = 0; i < kTiles.size(); ++i) {
    const double reuse = intensity(kTiles[i].m, kTiles[i].n) /
                         (intensity(kTiles[i].m, kTiles[i].n) + intensity_half);
    best = std::max(best, use[i] * reuse / best_reuse);
  }
  return best;
}

double gemm_occupancy(const GemmShape& s, std::int32_t sm_count, double intensity_half) {
  return gemm_occupancy(gemm_tile_use(s, sm_count), intensity_half);
}

double gemm_seconds(const Kernel& k, double occupancy, const GpuSpec& gpu, const GemmParams& g) {
  const double kk = static_cast<double>(std::max<std::int64_t>(k.gemm.k, 1));
  const double eff = gemm_fraction(g, k.dtype) * occupancy * kk / (kk + g.k_half);
  const double compute = k.flops / (peak_flops_of(gpu, k.dtype) * eff);
  const double memory = k.bytes / (gpu.hbm_Bps * g.memory_fraction);
  return soft_max(compute, memory, g.sharpness) + g.fixed_s;
}

AttentionWork attention_work(const AttentionShape& s, std::int32_t sm_count,
                             double split_min_keys) {
  AttentionWork w;
  if (s.batch <= 0 || s.heads <= 0 || s.seq_q <= 0) return w;
  const double sms = static_cast<double>(sm_count);
  const double sq = static_cast<double>(s.seq_q);
  const double rows = std::clamp(std::exp2(std::ceil(std::log2(sq))), 16.0, 128.0);
  const double blocks =
      static_cast<double>(s.batch) * static_cast<double>(s.heads) * ceil_div(sq, rows);
  const double padding = sq / (ceil_div(sq, rows) * rows);
  const double skv = static_cast<double>(std::max<std::int64_t>(s.seq_kv, 1));
  const double keys = s.causal ? std::max(skv - 0.5 * sq, 0.5 * sq) : skv;
  const double tiles = ceil_div(keys, 128);
  // Split-KV (FlashDecoding; FlashInfer's split-k prefill): when the query blocks do not fill
  // the GPU, each block's keys are cut into chunks of at least `split_min_keys` that idle SMs
  // take, and the partial results are merged.
  w.splits = blocks >= sms ? 1.0
                           : std::clamp(std::floor(sms / blocks), 1.0,
                                        std::max(1.0, std::floor(keys / split_min_keys)));
  const double ctas = blocks * w.splits;
  w.occupancy = padding * spread(ctas, sms);
  w.units_per_sm = ceil_div(ctas, sms) * ceil_div(tiles, w.splits);
  return w;
}

double kernel_seconds(const Kernel& k, const GpuSpec& gpu, const KernelParams& p) {
  switch (k.kind) {
    case KernelKind::none:
      return 0.0;
    case KernelKind::gemm:
      return gemm_seconds(k, gemm_occupancy(k.gemm, gpu.sm_count, p.gemm.intensity_half), gpu,
                          p.gemm);
    case KernelKind::attention: {
      const auto& s = k.attention;
      if (is_decode(s)) {
        const auto& d = p.decode;
        return d.fixed_s + d.per_sequence_s * static_cast<double>(s.batch) +
               k.bytes / (gpu.hbm_Bps * d.bandwidth_fraction);
      }
      const auto& a = p.attention;
      const double skv = static_cast<double>(std::max<std::int64_t>(s.seq_kv, 1));
      const auto work = attention_work(s, gpu.sm_count, a.split_min_keys);
      double eff = a.fraction * skv / (skv + a.kv_half) * work.occupancy;
      if (s.backward) eff *= a.backward_ratio;
      // FlashAttention runs its GEMMs in bf16/fp16 even in FP8 recipes (Transformer Engine's
      // default DotProductAttention), so the 16-bit peak applies.
      const double peak = peak_flops_of(gpu, k.dtype == DType::fp8 ? DType::bf16 : k.dtype);
      const double compute = std::max(k.flops / (peak * eff), work.units_per_sm * a.tile_s);
      const double memory = k.bytes / (gpu.hbm_Bps * p.gemm.memory_fraction);
      return std::max(compute, memory) + a.fixed_s;
    }
    case KernelKind::memory_bound: {
      const auto& m = p.of(k.memory_class);
      return std::max(m.floor_s, m.fixed_s + k.bytes / (gpu.hbm_Bps * m.bandwidth_fraction));
    }
  }
  return 0.0;
}

}  // namespace meshsim
