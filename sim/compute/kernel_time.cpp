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
constexpr double intensity(double tm, double tn) {
  return tm * tn / (tm + tn);
}

// Tile sides are 64, 128 or 256 = 2^(6 + c) for side class c = 0, 1, 2 (the blocks of a shape's
// side are counted once per class, not once per tile).
constexpr int kSideShift = 6;
constexpr double side_of(int c) {
  return static_cast<double>(std::int64_t{1} << (kSideShift + c));
}
constexpr int side_class(double side) {
  return side == side_of(0) ? 0 : side == side_of(1) ? 1 : 2;
}
struct Tile {
  double m, n;
  double reuse = intensity(m, n);
  int row_class = side_class(m), col_class = side_class(n);
};
constexpr std::array<Tile, 6> kTiles{
    {{128, 256}, {256, 128}, {128, 128}, {64, 128}, {128, 64}, {64, 64}}};
constexpr int kTileKShift = 6;  // K depth of one main-loop iteration, 2^6 (the stream-K work unit)
static_assert(std::all_of(kTiles.begin(), kTiles.end(), [](const Tile& t) {
  return side_of(t.row_class) == t.m && side_of(t.col_class) == t.n;
}));
// The menu runs from the most operand reuse to the least, so with intensity_half ≥ 0 (the
// loader and the fit keep it positive) each tile's efficiency factor is at most the one
// before it: gemm_occupancy(shape, ...) stops at the first tile that cannot win.
static_assert([] {
  for (std::size_t i = 1; i < kTiles.size(); ++i)
    if (kTiles[i].reuse > kTiles[i - 1].reuse) return false;
  return true;
}());

// A tile whose half-height tile (the same columns) is later in the menu: when both need as many
// row blocks, they launch as many tiles and take as long, so the taller one's use is exactly
// half the shorter one's, while its reuse factor is at most the ratio of their intensities
// (≤ 1.5, as intensity_half ≥ 0): it cannot win and is not priced (a decode-sized GEMM skips
// three of the six).
constexpr std::array<bool, kTiles.size()> kHasHalfLater = [] {
  std::array<bool, kTiles.size()> has{};
  for (std::size_t i = 0; i < kTiles.size(); ++i)
    for (std::size_t j = i + 1; j < kTiles.size(); ++j)
      if (kTiles[j].m * 2 == kTiles[i].m && kTiles[j].n == kTiles[i].n) {
        has[i] = true;
        if (kTiles[i].reuse >= 2 * kTiles[j].reuse) throw "the taller tile could win";
      }
  return has;
}();
static_assert(!kHasHalfLater[0] && kHasHalfLater[1] && kHasHalfLater[2] && !kHasHalfLater[3] &&
              kHasHalfLater[4] && !kHasHalfLater[5]);

// Units of `per_sm`-sized work spread over `sms` SMs: the busiest SM sets the time.
double spread(double units, double sms) {
  return units / (ceil_div(units, sms) * sms);
}

// (a^p + b^p)^(1/p), computed without overflow: max · (1 + (min/max)^p)^(1/p), as
// max · exp(log1p(exp(p · log(min/max))) / p): within a few units in the last place of
// std::pow's, and a quarter cheaper than two pow calls (glibc's pow pays for correct rounding;
// the price runs thousands of times per trace).
double soft_max(double a, double b, double p) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  if (hi <= 0) return 0;
  if (lo <= 0) return hi;
  const double inv_p = 1 / p;  // computed beside the chain below, not at its end
  return hi * std::exp(std::log1p(std::exp(p * std::log(lo / hi))) * inv_p);
}

// 0 when the GPU has no peak for `dtype`.
double find_peak(const GpuSpec& gpu, DType dtype) {
  const auto it = gpu.peak_flops.find(name_of(dtype));
  if (it != gpu.peak_flops.end()) return it->second;
  // FP32 GEMMs in training run on tensor cores as TF32 (PyTorch allow_tf32 for matmul).
  if (dtype == DType::fp32)
    if (auto tf = gpu.peak_flops.find("tf32"); tf != gpu.peak_flops.end()) return tf->second;
  return 0.0;
}

[[noreturn]] void no_peak(const std::string& model, DType dtype) {
  throw Error(model, "peak_flops",
              "this GPU has no " + std::string(name_of(dtype)) + " tensor-core peak");
}

}  // namespace

bool has_peak_flops(const GpuSpec& gpu, DType dtype) {
  return find_peak(gpu, dtype) > 0;
}

double peak_flops_of(const GpuSpec& gpu, DType dtype) {
  const double peak = find_peak(gpu, dtype);
  if (peak > 0) return peak;
  no_peak(gpu.model, dtype);
}

static_assert([] {
  for (std::size_t i = 0; i < kAllDTypes.size(); ++i)
    if (static_cast<std::size_t>(kAllDTypes[i]) != i) return false;
  return true;
}());

KernelGpu::KernelGpu(const GpuSpec& gpu)
    : model(gpu.model),
      hbm_Bps(gpu.hbm_Bps),
      sm_count(gpu.sm_count),
      l2_bytes(static_cast<double>(gpu.l2_bytes.count())) {
  for (const auto d : kAllDTypes) peak[static_cast<std::size_t>(d)] = find_peak(gpu, d);
}

void KernelGpu::no_peak(DType dtype) const {
  meshsim::no_peak(model, dtype);
}

namespace {

// What every tile of the menu shares for one shape on the SMs given. No default member
// initializers: every field is set on the path that reads it, so a price does not begin by
// zeroing the struct (GCC emitted a `rep stos`, microcoded, with a start-up of tens of cycles).
struct TileWork {
  bool empty;  // a degenerate shape: every tile's use is 1, and nothing else is read
  double B, left, sms, iters, useful;
  // Blocks of 64, 128 and 256 along M and N (ceil(M / side)).
  std::array<double, 3> row_blocks, col_blocks;
};

TileWork tile_work(const GemmShape& s, std::int32_t sm_count, SmsTaken taken) {
  TileWork w;  // one object, built in place (a second one would be copied out field by field)
  w.empty = s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0;
  if (w.empty) {
    w.B = w.left = w.sms = w.iters = w.useful = 0;
    w.row_blocks = w.col_blocks = {};
    return w;
  }
  const double M = static_cast<double>(s.m), N = static_cast<double>(s.n);
  // Sides are powers of two: ⌈x / 2^b⌉ in integers, shifts rather than divides and ceil (the
  // price runs thousands of times per trace).
  const auto blocks = [](std::int64_t x, int shift) {
    return static_cast<double>((x >> shift) + ((x & ((std::int64_t{1} << shift) - 1)) != 0));
  };
  for (int c = 0; c < 3; ++c) {
    w.row_blocks[c] = blocks(s.m, kSideShift + c);
    w.col_blocks[c] = blocks(s.n, kSideShift + c);
  }
  w.B = static_cast<double>(s.batch);
  // The SMs the kernel is launched for (its grid and split) and those it runs on.
  const double all = static_cast<double>(sm_count);
  w.left = std::max(1.0, all - static_cast<double>(std::max(taken.count, 0)));
  const double seen = static_cast<double>(std::clamp(taken.seen, 0, std::max(taken.count, 0)));
  w.sms = taken.planned_for_all ? std::max(1.0, all - seen) : w.left;
  w.iters = blocks(s.k, kTileKShift);
  // Useful work (unpadded tile area × iterations) over the SMs' capacity: use = padding ·
  // tiles · iters / (time · all) with padding = M·N·B / (tiles · tile area).
  w.useful = M * N * w.B * w.iters / all;
  return w;
}

double tile_use(const TileWork& w, const Tile& t) {
  if (w.empty) return 1.0;
  const double tiles = w.row_blocks[t.row_class] * w.col_blocks[t.col_class] * w.B;
  // Stream-K's hybrid schedule (Osama et al., "Stream-K: Work-centric Parallel Decomposition
  // for Dense Matrix-Matrix Multiplication", PPoPP 2023, §5 "DP + one-tile SK"; CUTLASS's
  // stream-K tile scheduler): all but the last one or two waves' tiles run as whole data-
  // parallel waves, and the rest are split evenly, in main-loop iterations, over one CTA per
  // SM, so no SM idles for a partial wave (fewer tiles than SMs is the same rule). On the SMs
  // left beside another kernel, the data-parallel tiles fill them wave by wave and the
  // stream-K CTAs, one per planned SM, take ⌈planned / left⌉ rounds. Time in iterations of
  // the busiest SM; on every SM (left == sms) that is ⌈tiles · iters / sms⌉, since the
  // data-parallel waves are whole.
  double time = ceil_div(tiles * w.iters, w.sms);
  if (w.left < w.sms) {
    const double dp_tiles = tiles >= 2 * w.sms ? (std::floor(tiles / w.sms) - 1) * w.sms : 0.0;
    time = ceil_div(dp_tiles, w.left) * w.iters +
           ceil_div(w.sms, w.left) * ceil_div((tiles - dp_tiles) * w.iters, w.sms);
  }
  return w.useful / (t.m * t.n * time);
}

// Per tile: its efficiency I/(I + intensity_half) relative to 128×256's.
class TileReuse {
 public:
  explicit TileReuse(double intensity_half)
      : half_(intensity_half), best_(kBest / (kBest + intensity_half)) {}
  double operator()(const Tile& t) const { return t.reuse / (t.reuse + half_) / best_; }

 private:
  static constexpr double kBest = intensity(128, 256);
  double half_, best_;
};

}  // namespace

GemmTileUse gemm_tile_use(const GemmShape& s, std::int32_t sm_count, SmsTaken taken) {
  const auto w = tile_work(s, sm_count, taken);
  GemmTileUse use{};
  for (std::size_t i = 0; i < kTiles.size(); ++i) use[i] = tile_use(w, kTiles[i]);
  return use;
}

double gemm_occupancy(const GemmTileUse& use, double intensity_half) {
  return gemm_occupancy(use, use, intensity_half);
}

double gemm_occupancy(const GemmTileUse& chosen_by, const GemmTileUse& runs_at,
                      double intensity_half) {
  const TileReuse reuse_of(intensity_half);
  double best = -1, occupancy = 0;
  for (std::size_t i = 0; i < kTiles.size(); ++i) {
    const double reuse = reuse_of(kTiles[i]);
    if (chosen_by[i] * reuse > best) {
      best = chosen_by[i] * reuse;
      occupancy = runs_at[i] * reuse;
    }
  }
  return occupancy;
}

double gemm_occupancy(const GemmShape& s, std::int32_t sm_count, double intensity_half,
                      SmsTaken taken) {
  // The same choice as gemm_occupancy(gemm_tile_use(...)), tile by tile, stopping once no
  // tile left can win: a tile's use is at most 1 (its busiest SM's time is at least the
  // work spread evenly), so one whose reuse factor is no better than the best score so far
  // cannot beat it (the 1e-12 margin covers the use's rounding). A large GEMM's first tile
  // is near 1, which skips four of the six (the price runs thousands of times per trace).
  // A kernel launched for the whole GPU (or for the SMs the `seen` part of `taken` leaves) was
  // chosen for it (the library does not see the collective beside it) and runs at that tile's
  // use of the SMs left.
  const bool beside = taken.count > 0 && taken.planned_for_all && taken.seen < taken.count;
  const auto chosen =
      tile_work(s, sm_count, beside ? SmsTaken{std::max(taken.seen, 0), false} : taken);
  const TileReuse reuse_of(intensity_half);
  double best = -1;
  std::size_t pick = 0;
  for (std::size_t i = 0; i < kTiles.size(); ++i) {
    // Skipping a tile before the stop test below is safe: the tiles after it reuse no more.
    const int rows = kTiles[i].row_class;
    if (kHasHalfLater[i] && chosen.row_blocks[rows] == chosen.row_blocks[rows - 1])
      continue;  // loses to its half-height tile, later in the menu (kHasHalfLater)
    const double reuse = reuse_of(kTiles[i]);
    if (best > reuse * (1 + 1e-12)) break;
    const double score = tile_use(chosen, kTiles[i]) * reuse;
    if (score > best) {
      best = score;
      pick = i;
    }
  }
  if (!beside) return best;
  return tile_use(tile_work(s, sm_count, taken), kTiles[pick]) * reuse_of(kTiles[pick]);
}

double gemm_seconds(const Kernel& k, double occupancy, const KernelGpu& gpu, const GemmParams& g) {
  const double kk = static_cast<double>(std::max<std::int64_t>(k.gemm.k, 1));
  // FLOPs / (peak · fraction · occupancy · K/(K + k_half)), with one division after the
  // occupancy rather than two (the price's latency is a chain of dependent divisions).
  const double compute = k.flops * (kk + g.k_half) /
                         (gpu.peak_flops(k.dtype) * gemm_fraction(g, k.dtype) * occupancy * kk);
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
  AttentionShape at_least_one = s;
  at_least_one.seq_kv = std::max<std::int64_t>(s.seq_kv, 1);
  const double keys = attended_keys(at_least_one);
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

double l2_resident_share(MemoryClass c) {
  switch (c) {
    case MemoryClass::norm:
    case MemoryClass::rotary:
    case MemoryClass::softmax:
    case MemoryClass::kv_append:
      return 1.0 / 2.0;
    case MemoryClass::elementwise:
    case MemoryClass::activation:
      return 2.0 / 3.0;
    case MemoryClass::gather:
    case MemoryClass::optimizer:
      return 0.0;
  }
  return 0.0;
}

namespace {

// A memory-bound kernel's time (compute/kernel_time.hpp gives the formula).
double memory_kernel_seconds(double bytes, MemoryClass c, const KernelGpu& gpu,
                             const MemoryClassParams& m) {
  // The resident share holds while the kernel's traffic fits in half the L2 and falls linearly
  // to none once it fills the whole L2. Assumption (named): A100's and H100's L2 are two
  // partitions, each caching for the SMs beside it (NVIDIA A100 and H100 architecture
  // whitepapers), so data all SMs read may sit in both; the measurements fall over that range
  // (../shared/measurements: Llama RMSNorm on H100 1.3–1.5 TB/s up to 32 MiB of traffic, 1.1 from
  // 42 MiB of its 50; on A100 ~850 GB/s up to 23 MiB, ~670 from 34 MiB of its 40).
  double resident = 0;
  if (gpu.l2_bytes > 0)
    resident = l2_resident_share(c) * bytes *
               std::clamp((gpu.l2_bytes - bytes) / (0.5 * gpu.l2_bytes), 0.0, 1.0);
  const double hbm = gpu.hbm_Bps * m.bandwidth_fraction;
  return std::max(m.floor_s,
                  m.fixed_s + (bytes - resident) / hbm + resident / (hbm * m.l2_speedup));
}

}  // namespace

double kernel_seconds(const Kernel& k, const KernelGpu& gpu, const KernelParams& p,
                      SmsTaken taken) {
  switch (k.kind) {
    case KernelKind::none:
      return 0.0;
    case KernelKind::gemm:
      return gemm_seconds(k, gemm_occupancy(k.gemm, gpu.sm_count, p.gemm.intensity_half, taken),
                          gpu, p.gemm);
    case KernelKind::attention: {
      const auto& s = k.attention;
      if (is_decode(s)) {
        const auto& d = p.decode;
        return d.fixed_s + d.per_sequence_s * static_cast<double>(s.batch) +
               k.bytes / (gpu.hbm_Bps * d.bandwidth_fraction);
      }
      const auto& a = p.attention;
      const double skv = static_cast<double>(std::max<std::int64_t>(s.seq_kv, 1));
      // Beside another kernel, FlashAttention's blocks (one grid, no persistent split) fill the
      // SMs left wave by wave: the occupancy of those SMs at their share of the peak.
      const std::int32_t left = std::max(1, gpu.sm_count - std::max(taken.count, 0));
      const auto work = attention_work(s, left, a.split_min_keys);
      double eff = a.fraction * skv / (skv + a.kv_half) * work.occupancy *
                   static_cast<double>(left) / static_cast<double>(gpu.sm_count);
      if (s.backward) eff *= a.backward_ratio;
      // FlashAttention runs its GEMMs in bf16/fp16 even in FP8 recipes (Transformer Engine's
      // default DotProductAttention), so the 16-bit peak applies.
      const double peak = gpu.peak_flops(k.dtype == DType::fp8 ? DType::bf16 : k.dtype);
      const double compute = std::max(k.flops / (peak * eff), work.units_per_sm * a.tile_s);
      const double memory = k.bytes / (gpu.hbm_Bps * p.gemm.memory_fraction);
      return std::max(compute, memory) + a.fixed_s;
    }
    case KernelKind::memory_bound:
      return memory_kernel_seconds(k.bytes, k.memory_class, gpu, p.of(k.memory_class));
  }
  return 0.0;
}

}  // namespace meshsim
