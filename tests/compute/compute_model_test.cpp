#include "compute/compute_model.hpp"

#include <doctest/doctest.h>

#include <cmath>

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
}

TEST_CASE("tile and wave quantization") {
  // 8192² output in 128² tiles: 64·64 = 4096 tiles over 132 SMs → 32 waves of 132 slots;
  // useful 4096 / (32·132).
  CHECK(gemm_quantization({8192, 8192, 8192, 1}, 128, 132) == doctest::Approx(4096.0 / 4224.0));
  // N = 192 fills 1.5 tiles: 8·2 = 16 tiles, one wave of 132; useful 1024·192 / (132·128²).
  CHECK(gemm_quantization({1024, 192, 64, 1}, 128, 132) ==
        doctest::Approx(1024.0 * 192 / (132.0 * 128 * 128)));
  // Skinny decode GEMM: 1×4096 output is 32 tiles; K = 14336 is deep enough to split 4 ways
  // (⌊132/32⌋), so 128 of 132 SMs work on 1/128 useful rows.
  CHECK(gemm_quantization({1, 4096, 14336, 1}, 128, 132) ==
        doctest::Approx(1.0 * 4096 * 4 / (132.0 * 128 * 128)));
  // A perfect fit: 132 tiles, one full wave.
  CHECK(gemm_quantization({128 * 132, 128, 64, 1}, 128, 132) == doctest::Approx(1.0));
  // Attention: b·heads·⌈s/128⌉ = 2·16·64 = 2048 blocks → 16 waves of 132.
  AttentionShape a{2, 8192, 8192, 16, 128, 16, false, false};
  CHECK(attention_quantization(a, 128, 132) == doctest::Approx(2048.0 / (16 * 132)));
}

TEST_CASE("roofline time with default efficiency, H100 bf16 8192³") {
  const ComputeModel cm(h100());
  const auto k = gemm_kernel({8192, 8192, 8192, 1}, DType::bf16);
  // efficiency = 0.75 (bf16 fraction) × 4096/4224 (quantization) × 8192/(8192 + 288) (K ramp).
  const double eff = 0.75 * (4096.0 / 4224.0) * (8192.0 / 8480.0);
  CHECK(cm.gemm_efficiency(k.gemm, DType::bf16) == doctest::Approx(eff));
  const double expected = 2.0 * 8192 * 8192 * 8192 / (989e12 * eff) + 3.25e-6;
  CHECK(cm.seconds(k) == doctest::Approx(expected));
  CHECK(cm.time(k) == Time::from_seconds_ceil(cm.seconds(k)));
}

TEST_CASE("memory-bound kernels run at the STREAM fraction of HBM bandwidth") {
  const ComputeModel cm(h100());
  // 1 GB at 2.97 TB/s (Azure triad on H100) plus the 3.25 µs per-kernel cost.
  CHECK(cm.memory_bandwidth_Bps() == doctest::Approx(2.97e12));
  CHECK(cm.seconds(memory_kernel(1e9)) == doctest::Approx(1e9 / 2.97e12 + 3.25e-6));
  // A skinny GEMM whose bytes dominate takes the HBM time: M = 1M, N = 8, K = 8192 reads 16 GiB
  // of A (5.8 ms) for 137 GFLOP at 4.5 % efficiency (N fills 8/128 of a tile; 3.1 ms).
  const auto skinny = gemm_kernel({1 << 20, 8, 8192, 1}, DType::bf16);
  const double memory_s = skinny.bytes / 2.97e12;
  CHECK(cm.seconds(skinny) == doctest::Approx(memory_s + 3.25e-6));
  CHECK(cm.seconds(Kernel{}) == 0.0);
}

TEST_CASE("the default curve reproduces the published microbenchmarks it was fitted to") {
  // Azure AI-benchmarking-guide (validation/hardware.md C2): TFLOP/s of cuBLASLt GEMMs.
  struct Row {
    const char* gpu;
    DType dtype;
    GemmShape shape;
    double tflops;
  };
  const Row rows[] = {
      {"A100-SXM4-80GB", DType::fp16, {16384, 16384, 16384, 1}, 256.5},
      {"A100-SXM4-80GB", DType::fp16, {4096, 4096, 4096, 1}, 228.0},
      {"A100-SXM4-80GB", DType::fp16, {1024, 1024, 1024, 1}, 119.4},
      {"H100-SXM5-80GB", DType::fp8, {8192, 8192, 8192, 1}, 1290.1},
      {"H100-SXM5-80GB", DType::fp8, {1024, 1024, 1024, 1}, 274.1},
      {"H100-SXM5-80GB", DType::fp8, {802816, 192, 768, 1}, 663.8},
      {"H200-SXM-141GB", DType::fp8, {4096, 4096, 4096, 1}, 1249.1},
  };
  for (const auto& r : rows) {
    const ComputeModel cm(*find_gpu(r.gpu));
    const auto k = gemm_kernel(r.shape, r.dtype);
    const double tflops = k.flops / cm.seconds(k) / 1e12;
    INFO(r.gpu << " " << r.shape.m << "x" << r.shape.n << "x" << r.shape.k);
    CHECK(tflops == doctest::Approx(r.tflops).epsilon(0.12));
  }
}

TEST_CASE("a calibration profile is exact on its points and interpolates between them") {
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.source = "test";
  p.file = "test.json";
  p.gemm.push_back({DType::bf16, {4096, 4096, 4096, 1}, 600e12});
  p.gemm.push_back({DType::bf16, {16384, 16384, 16384, 1}, 800e12});
  const ComputeModel cm(h100(), p);
  const auto at = [&](std::int64_t n) {
    const auto k = gemm_kernel({n, n, n, 1}, DType::bf16);
    return k.flops / cm.seconds(k);
  };
  CHECK(at(4096) == doctest::Approx(600e12));
  CHECK(at(16384) == doctest::Approx(800e12));
  // 8192³ lies midway in log space: the log-correction is the mean of the two points'.
  const ComputeModel plain(h100());
  const auto k8 = gemm_kernel({8192, 8192, 8192, 1}, DType::bf16);
  const auto k4 = gemm_kernel({4096, 4096, 4096, 1}, DType::bf16);
  const auto k16 = gemm_kernel({16384, 16384, 16384, 1}, DType::bf16);
  const double c4 = (k4.flops / 600e12) / plain.seconds(k4);
  const double c16 = (k16.flops / 800e12) / plain.seconds(k16);
  CHECK(cm.seconds(k8) == doctest::Approx(plain.seconds(k8) * std::sqrt(c4 * c16)));
  // Other dtypes keep the default curve.
  const auto f8 = gemm_kernel({4096, 4096, 4096, 1}, DType::fp8);
  CHECK(cm.seconds(f8) == doctest::Approx(plain.seconds(f8)));
  // A profile moves a kernel's time by exactly its measured ratio: halving the measured rate
  // doubles the time of that shape.
  p.gemm[0].flops_per_s = 300e12;
  const ComputeModel slower(h100(), p);
  CHECK(slower.seconds(k4) == doctest::Approx(2 * cm.seconds(k4)));
}

TEST_CASE("profile overrides: memory bandwidth, launch overhead, attention points") {
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.file = "x.json";
  p.memory_bandwidth_Bps = 3.0e12;
  p.launch_overhead = Time::us(2);
  AttentionShape s{2, 8192, 8192, 16, 128, 16, false, false};
  p.attention.push_back({DType::bf16, s, 400e12});
  const ComputeModel cm(h100(), p);
  CHECK(cm.seconds(memory_kernel(3e9)) == doctest::Approx(1e-3 + 2e-6));
  const auto k = attention_kernel(s, DType::bf16);
  CHECK(k.flops / cm.seconds(k) == doctest::Approx(400e12));
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
}

TEST_CASE("unknown GPUs get generic efficiencies and say so") {
  auto g = *find_gpu("B200-SXM-180GB");
  const ComputeModel cm(g);
  CHECK(cm.defaults().generic);
  CHECK(cm.describe().find("generic") != std::string::npos);
  CHECK_FALSE(ComputeModel(h100()).defaults().generic);
}
