#include "compute/compute_model.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "compute/bundled_profiles.hpp"
#include "compute/kernel_time.hpp"
#include "core/error.hpp"
#include "test_paths.hpp"

using namespace meshsim;

namespace {
GpuSpec h100() {
  return *find_gpu("H100-SXM5-80GB");
}
GpuSpec a100() {
  return *find_gpu("A100-SXM4-80GB");
}
// Round numbers for hand-computed checks (not the bundled fit).
KernelParams test_params() {
  KernelParams p;
  p.gemm = {.fraction_16bit = 0.8,
            .fraction_fp8 = 0.7,
            .k_half = 64,
            .intensity_half = 0,
            .memory_fraction = 0.9,
            .sharpness = 4,
            .fixed_s = 3e-6};
  for (auto& c : p.memory) c = {0.5, 2e-6, 3e-6};
  p.attention = {.fraction = 0.5, .kv_half = 256, .fixed_s = 10e-6, .backward_ratio = 0.8};
  p.decode = {.bandwidth_fraction = 0.8, .fixed_s = 10e-6, .per_sequence_s = 0.1e-6};
  return p;
}
}  // namespace

TEST_CASE("kernel FLOPs and bytes") {
  // 2·M·N·K per problem; A, B, C once each in bf16.
  const auto g = gemm_kernel({4096, 1024, 512, 3}, DType::bf16);
  CHECK(g.flops == 2.0 * 4096 * 1024 * 512 * 3);
  CHECK(g.bytes == 3.0 * 2 * (4096.0 * 512 + 512.0 * 1024 + 4096.0 * 1024));
  // fp8 inputs, bf16 output.
  const auto f8 = gemm_kernel({1024, 1024, 1024, 1}, DType::fp8);
  CHECK(f8.bytes == 1024.0 * 1024 * (1 + 1 + 2));
  // Flash attention: 4·b·s_q·s_kv·heads·d, halved for causal; backward 2.5×.
  AttentionShape s{2, 4096, 4096, 32, 128, 8, false, false};
  const auto fwd = attention_kernel(s, DType::bf16);
  CHECK(fwd.flops == 4.0 * 2 * 4096 * 4096 * 32 * 128);
  // Q and O with 32 heads, K and V with 8: 2·b·s·(32 + 8)·128 elements of 2 bytes.
  CHECK(fwd.bytes == 2.0 * (2.0 * 2 * 4096 * 32 * 128 + 2.0 * 2 * 4096 * 8 * 128));
  s.causal = true;
  CHECK(attention_kernel(s, DType::bf16).flops == fwd.flops / 2);
  s.backward = true;
  CHECK(attention_kernel(s, DType::bf16).flops == 2.5 * fwd.flops / 2);
  // A causal chunk of 1024 queries after 3072 cached keys: each query sees the context and,
  // on average, half the chunk: 4·b·heads·d·1024·(4096 − 512).
  AttentionShape chunk{1, 1024, 4096, 32, 128, 8, true, false};
  CHECK(attention_kernel(chunk, DType::bf16).flops == 4.0 * 32 * 128 * 1024 * (4096 - 512));
  // The same 1024 queries as a CP rank's two load-balanced chunks of a 4096-token sequence
  // (cp = 2: chunks 0 and 3 of 512): 512·(256) + 512·(1536 + 256) key visits = 1024·2048, half
  // the sequence per query, not the last chunk's 4096 − 512.
  chunk.balanced = true;
  CHECK(attended_keys(chunk) == 2048);
  CHECK(attention_kernel(chunk, DType::bf16).flops == 4.0 * 32 * 128 * 1024 * 2048);
  CHECK(memory_kernel(MemoryClass::norm, 1e6).memory_class == MemoryClass::norm);
}

TEST_CASE("GEMM occupancy: tile menu, stream-K over the K loop") {
  // 8192² on 132 SMs with every tile equally efficient (intensity_half 0): 64×64 tiles,
  // 128·128 = 16384 of them × 128 K-iterations = 2,097,152 units, ⌈…/132⌉ = 15,888 per SM.
  CHECK(gemm_occupancy({8192, 8192, 8192, 1}, 132, 0) ==
        doctest::Approx(2097152.0 / (15888.0 * 132)));
  // With reuse mattering, 128×256 wins: 2048 tiles (15.5 waves; whole waves alone would leave
  // the last one half empty, 2048/2112) × 128 K-iterations = 262,144 units, 1,986 per SM.
  const auto big = gemm_occupancy({8192, 8192, 8192, 1}, 132, 1e6);
  CHECK(big == doctest::Approx(262144.0 / (1986.0 * 132)).epsilon(1e-4));
  // 1024 × 1024 × 256: 128×256 tiles, 32 of them × 4 K-iterations = 128 units on 132 SMs.
  CHECK(gemm_occupancy({1024, 1024, 256, 1}, 132, 1e6) ==
        doctest::Approx(128.0 / 132).epsilon(1e-4));
  // Decode GEMM 1×4096×4096: 64 tiles of 64×64 (padding 1/64) under stream-K: 64 tiles ×
  // 64 K-iterations = 4096 units over 132 SMs, ⌈4096/132⌉ = 32 per SM: busy 4096/(32·132).
  CHECK(gemm_occupancy({1, 4096, 4096, 1}, 132, 0) == doctest::Approx(4096.0 / (32 * 132) / 64));
}

TEST_CASE("GEMM occupancy: stopping at the first tile that cannot win picks the menu's best") {
  // gemm_occupancy(shape, ...) stops scanning the menu early and skips a tile whose half-height
  // tile needs as many row blocks (M on either side of 64, 128 and 256 rows); it must equal the
  // occupancy of the whole menu's uses, exactly, with and without a collective's SMs taken
  // beside it.
  std::int64_t checked = 0, differ = 0;
  for (std::int64_t m : {1, 7, 64, 65, 100, 128, 129, 192, 256, 257, 640, 2049, 8192})
    for (std::int64_t n : {64, 1000, 4096, 10240, 28672})
      for (std::int64_t k : {64, 512, 8192})
        for (double half : {0.0, 7.1, 15.6, 1e6})
          for (SmsTaken taken :
               {SmsTaken{}, SmsTaken{24, true}, SmsTaken{24, false}, SmsTaken{48, true, 24}}) {
            const GemmShape s{m, n, k, m % 2 ? 3 : 1};
            const double whole =
                taken.count > taken.seen && taken.planned_for_all
                    ? gemm_occupancy(gemm_tile_use(s, 132, SmsTaken{taken.seen, false}),
                                     gemm_tile_use(s, 132, taken), half)
                    : gemm_occupancy(gemm_tile_use(s, 132, taken), half);
            ++checked;
            if (gemm_occupancy(s, 132, half, taken) != whole) ++differ;
          }
  CHECK(checked == 13 * 5 * 3 * 4 * 4);
  CHECK(differ == 0);
}

TEST_CASE("GEMM occupancy: a kernel planned for the SMs a seen collective leaves, beside another") {
  // 1152×3072×6400: 9 × 12 = 108 tiles of 128×256 (no padding), 100 K-iterations each; useful
  // share of the 132 SMs' capacity per time unit: 108/132 at 100 iterations.
  const GemmShape s{1152, 3072, 6400, 1};
  // Planned for and run on the 108 SMs its own reduce-scatter leaves (24 of 132): one whole
  // wave, 100 iterations → 108/132.
  CHECK(gemm_occupancy(s, 132, 7.1, SmsTaken{24, false}) == doctest::Approx(108.0 / 132));
  CHECK(gemm_occupancy(s, 132, 7.1, SmsTaken{24, true, 24}) == doctest::Approx(108.0 / 132));
  // The same plan (108 stream-K CTAs, fewer than 2 × 108 tiles: no data-parallel waves) meeting
  // 24 more SMs taken by another collective: ⌈108/84⌉ = 2 rounds of 100 → half.
  CHECK(gemm_occupancy(s, 132, 7.1, SmsTaken{48, true, 24}) == doctest::Approx(108.0 / 264));
  // Planned for the 84 left: ⌈108 · 100 / 84⌉ = 129 iterations.
  CHECK(gemm_occupancy(s, 132, 7.1, SmsTaken{48, false}) ==
        doctest::Approx(108.0 / 132 * 100 / 129));
}

TEST_CASE("GEMM time: softened roofline plus fixed cost, H100 bf16 8192³") {
  const auto p = test_params();
  const auto k = gemm_kernel({8192, 8192, 8192, 1}, DType::bf16);
  const double occ = 2097152.0 / (15888.0 * 132);
  const double eff = 0.8 * occ * 8192.0 / (8192 + 64);
  const double c = k.flops / (989e12 * eff), m = k.bytes / (3.35e12 * 0.9);
  const double expected = std::pow(std::pow(c, 4) + std::pow(m, 4), 0.25) + 3e-6;
  CHECK(kernel_seconds(k, h100(), p) == doctest::Approx(expected));
  // fp8 uses its own fraction and peak.
  const auto f = gemm_kernel({8192, 8192, 8192, 1}, DType::fp8);
  const double c8 = f.flops / (1979e12 * 0.7 * occ * 8192.0 / (8192 + 64));
  const double m8 = f.bytes / (3.35e12 * 0.9);
  CHECK(kernel_seconds(f, h100(), p) ==
        doctest::Approx(std::pow(std::pow(c8, 4) + std::pow(m8, 4), 0.25) + 3e-6));
}

TEST_CASE("memory-bound, decode and prefill attention kernels") {
  const auto p = test_params();
  // 1 GB at half of 3.35 TB/s plus 2 µs; a tiny kernel takes the 3 µs floor.
  CHECK(kernel_seconds(memory_kernel(MemoryClass::norm, 1e9), h100(), p) ==
        doctest::Approx(1e9 / (0.5 * 3.35e12) + 2e-6));
  CHECK(kernel_seconds(memory_kernel(MemoryClass::norm, 100), h100(), p) == doctest::Approx(3e-6));
  // Decode: 64 sequences of 2048 keys, 8 KV heads of 128: fixed + 64 · 0.1 µs + bytes at 0.8.
  AttentionShape d{64, 1, 2048, 32, 128, 8, true, false};
  const auto dk = attention_kernel(d, DType::bf16);
  CHECK(kernel_seconds(dk, h100(), p) ==
        doctest::Approx(10e-6 + 64 * 0.1e-6 + dk.bytes / (0.8 * 3.35e12)));
  // Prefill, 2 × 16 heads × 8192 queries in 128-row blocks: 2048 blocks in 16 waves of 132;
  // efficiency 0.5 · 8192/(8192 + 256) · 2048/2112, non-causal.
  AttentionShape a{2, 8192, 8192, 16, 128, 16, false, false};
  CHECK(attention_work(a, 132, 128).occupancy == doctest::Approx(2048.0 / 2112));
  const auto ak = attention_kernel(a, DType::bf16);
  const double eff = 0.5 * 8192.0 / (8192 + 256) * 2048.0 / 2112;
  CHECK(kernel_seconds(ak, h100(), p) == doctest::Approx(ak.flops / (989e12 * eff) + 10e-6));
  a.backward = true;
  const auto bk = attention_kernel(a, DType::bf16);
  CHECK(kernel_seconds(bk, h100(), p) == doctest::Approx(bk.flops / (989e12 * eff * 0.8) + 10e-6));
  // Split-KV: a 64-query chunk over 12,608 keys has 32 blocks (one per head), too few for 132
  // SMs: each block's keys split ⌊132/32⌋ = 4 ways, 128 CTAs on 132 SMs (without the split:
  // 32/132). Its causal keys, 12608 − 32 = 12576, are 99 tiles: 25 per split, one CTA per SM.
  AttentionShape chunk{1, 64, 12608, 32, 128, 8, true, false};
  CHECK(attention_work(chunk, 132, 128).occupancy == doctest::Approx(128.0 / 132));
  const auto w = attention_work(chunk, 132, 4096);  // splits of at least 4096 keys: 3 ways
  CHECK(w.splits == 3);
  CHECK(w.occupancy == doctest::Approx(96.0 / 132));
  CHECK(w.units_per_sm == 33);
}

TEST_CASE("memory-bound kernels read their inputs from L2 while their traffic fits") {
  auto p = test_params();  // every class: half of HBM, 2 µs fixed, 3 µs floor
  p.of(MemoryClass::norm).l2_speedup = 2;
  p.of(MemoryClass::gather).l2_speedup = 2;
  const double hbm = 0.5 * 3.35e12, l2 = 50.0 * (1 << 20);  // H100: 50 MiB of L2
  const auto norm = [&](double bytes, const GpuSpec& gpu = h100()) {
    return kernel_seconds(memory_kernel(MemoryClass::norm, bytes), gpu, p);
  };
  CHECK(l2_resident_share(MemoryClass::norm) == 0.5);
  CHECK(l2_resident_share(MemoryClass::elementwise) == doctest::Approx(2.0 / 3));
  CHECK(l2_resident_share(MemoryClass::gather) == 0);
  // 10 MB, within half the L2: its 5 MB read at twice the HBM rate, its 5 MB write at the rate.
  CHECK(norm(10e6) == doctest::Approx(2e-6 + 5e6 / hbm + 5e6 / (2 * hbm)));
  // Three quarters of the L2: halfway down the ramp, a quarter of the traffic from L2.
  CHECK(norm(0.75 * l2) ==
        doctest::Approx(2e-6 + 0.75 * (0.75 * l2) / hbm + 0.25 * (0.75 * l2) / (2 * hbm)));
  // The whole L2 and beyond: all from HBM, as before the L2 term.
  CHECK(norm(l2) == doctest::Approx(2e-6 + l2 / hbm));
  CHECK(norm(1e9) == doctest::Approx(2e-6 + 1e9 / hbm));
  // No step at either end of the ramp.
  for (const double edge : {0.5 * l2, l2})
    CHECK(norm(edge + 1) == doctest::Approx(norm(edge - 1)).epsilon(1e-6));
  // An embedding gathers rows read long before; a GPU with no L2 size reads all from HBM.
  CHECK(kernel_seconds(memory_kernel(MemoryClass::gather, 10e6), h100(), p) ==
        doctest::Approx(2e-6 + 10e6 / hbm));
  const auto b200 = *find_gpu("B200-SXM-180GB");
  CHECK(norm(10e6, b200) == doctest::Approx(2e-6 + 10e6 / (0.5 * b200.hbm_Bps)));
}

TEST_CASE("bundled fits: compiled in, as in topologies/calibration, scaled to other GPUs") {
  for (const auto& [gpu, file] : {std::pair{"H100-SXM5-80GB", "h100-sxm-default.json"},
                                  std::pair{"A100-SXM4-80GB", "a100-sxm-default.json"}}) {
    const auto spec = *find_gpu(gpu);
    const auto profile = load_calibration_profile(test::topology_path("calibration/") + file);
    REQUIRE(profile.model);
    CHECK(
        to_json(bundled_kernel_params(spec)) ==
        to_json(read_kernel_params(JsonRef::root(*profile.model, file), generic_kernel_params())));
    const ComputeModel cm(spec);
    CHECK(cm.measured_gpu());
    CHECK(cm.describe().find("measured on " + std::string(gpu)) != std::string::npos);
  }
  // B200 takes the H100 fractions with its own specs, and says so.
  const ComputeModel b200(*find_gpu("B200-SXM-180GB"));
  CHECK_FALSE(b200.measured_gpu());
  CHECK(b200.describe().find("scaled to B200-SXM-180GB") != std::string::npos);
  CHECK(to_json(b200.params()) == to_json(ComputeModel(h100()).params()));
  // A100 40GB takes the A100 fit.
  CHECK(to_json(ComputeModel(*find_gpu("A100-SXM4-40GB")).params()) ==
        to_json(ComputeModel(a100()).params()));
}

TEST_CASE("a calibration profile is exact on its points and corrects only their neighbourhood") {
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.source = "test";
  p.file = "test.json";
  p.gemm.push_back({DType::bf16, {4096, 4096, 4096, 1}, 600e12});
  const ComputeModel cm(h100(), p);
  const ComputeModel plain(h100());
  const auto k4 = gemm_kernel({4096, 4096, 4096, 1}, DType::bf16);
  CHECK(k4.flops / cm.seconds(k4) == doctest::Approx(600e12));
  // fp16 is the same class as bf16: the point applies to it too.
  const auto h4 = gemm_kernel({4096, 4096, 4096, 1}, DType::fp16);
  CHECK(h4.flops / cm.seconds(h4) == doctest::Approx(600e12));
  // 8192³ is √3 octaves away (beyond the 1.5-octave radius): the model alone.
  const auto k8 = gemm_kernel({8192, 8192, 8192, 1}, DType::bf16);
  CHECK(cm.seconds(k8) == doctest::Approx(plain.seconds(k8)));
  // 4096×4096×5793 is 0.5 octave away in K: weight (1 − 0.25/2.25)²/0.25 = 3.16 against the
  // model's 1/2.25 = 0.444, so 87.7 % of the point's log-correction.
  const auto kn = gemm_kernel({4096, 4096, 5793, 1}, DType::bf16);
  const double c4 = std::log((k4.flops / 600e12) / plain.seconds(k4));
  const double d2 = std::pow(std::log2(5793.0) - 12, 2);
  const double w = std::pow(1 - d2 / 2.25, 2) / d2, w0 = 1 / 2.25;
  CHECK(cm.seconds(kn) == doctest::Approx(plain.seconds(kn) * std::exp(w * c4 / (w + w0))));
  // fp8 keeps the model.
  const auto f8 = gemm_kernel({4096, 4096, 4096, 1}, DType::fp8);
  CHECK(cm.seconds(f8) == doctest::Approx(plain.seconds(f8)));
  // Halving the measured rate doubles that shape's time.
  p.gemm[0].flops_per_s = 300e12;
  const ComputeModel slower(h100(), p);
  CHECK(slower.seconds(k4) == doctest::Approx(2 * cm.seconds(k4)));
}

TEST_CASE("profile overrides: fitted model, HBM sweep, attention points") {
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.file = "x.json";
  p.memory_bandwidth_Bps = 3.0e12;
  p.launch_overhead = Time::us(2);
  AttentionShape s{2, 8192, 8192, 16, 128, 16, false, false};
  p.attention.push_back({DType::bf16, s, 400e12});
  p.model = Json{{"gemm", {{"fraction_16bit", 0.5}}}};
  const ComputeModel cm(h100(), p);
  // The HBM sweep sets the elementwise class: 3 GB at 3 TB/s + 2 µs.
  CHECK(cm.seconds(memory_kernel(MemoryClass::elementwise, 3e9)) == doctest::Approx(1e-3 + 2e-6));
  const auto k = attention_kernel(s, DType::bf16);
  CHECK(k.flops / cm.seconds(k) == doctest::Approx(400e12));
  CHECK(cm.params().gemm.fraction_16bit == 0.5);
  CHECK(cm.params().gemm.k_half == ComputeModel(h100()).params().gemm.k_half);
}

TEST_CASE("compute model errors") {
  CalibrationProfile p;
  p.gpu = "A100-SXM4-80GB";
  p.file = "a100.json";
  CHECK_THROWS_WITH_AS(ComputeModel(h100(), p),
                       "a100.json:/gpu: profile was measured on 'A100-SXM4-80GB' but the cluster "
                       "has 'H100-SXM5-80GB'",
                       Error);
  const ComputeModel cm(a100());
  CHECK_THROWS_WITH_AS(cm.seconds(gemm_kernel({64, 64, 64, 1}, DType::fp8)),
                       "A100-SXM4-80GB:peak_flops: this GPU has no fp8 tensor-core peak", Error);
  // FP32 GEMMs run as TF32.
  CHECK(cm.peak_flops(DType::fp32) == 156e12);
  const Json bad = {{"gemm", {{"fraction_16bit", 1.5}}}};
  CHECK_THROWS_WITH_AS(read_kernel_params(JsonRef::root(bad, "p.json"), generic_kernel_params()),
                       "p.json:/gemm/fraction_16bit: must be a fraction in (0, 1]", Error);
  const Json unknown = {{"memory", {{"normz", Json::object()}}}};
  CHECK_THROWS_WITH_AS(
      read_kernel_params(JsonRef::root(unknown, "p.json"), generic_kernel_params()),
      "p.json:/memory/normz: unknown kernel class 'normz' (known: elementwise, activation, norm, "
      "rotary, gather, softmax, kv_append, optimizer)",
      Error);
  // The L2 speed-up: at least 1 (L2 no slower than HBM), read back as written.
  const Json slow = {{"memory", {{"norm", {{"l2_speedup", 0.5}}}}}};
  CHECK_THROWS_WITH_AS(read_kernel_params(JsonRef::root(slow, "p.json"), generic_kernel_params()),
                       "p.json:/memory/norm/l2_speedup: must be between 1 and 100", Error);
  const Json fast = {{"memory", {{"norm", {{"l2_speedup", 2.5}}}}}};
  const auto read = read_kernel_params(JsonRef::root(fast, "p.json"), generic_kernel_params());
  CHECK(read.of(MemoryClass::norm).l2_speedup == 2.5);
  CHECK(read.of(MemoryClass::rotary).l2_speedup == 1);
  CHECK(to_json(read.of(MemoryClass::norm))["l2_speedup"] == 2.5);
}
