#include "topology/gpu_spec.hpp"

#include <algorithm>

#include "core/physical_limits.hpp"

namespace meshsim {

const std::vector<GpuSpec>& gpu_catalogue() {
  // SM counts: A100 108, H100 SXM5 132, H100 PCIe 114, H200 132 (same die as H100 SXM), B200 and
  // GB200 148, L40S 142 (NVIDIA A100/H100/Blackwell whitepapers, L40S datasheet).
  // Dense peaks; TF32 dense is half the sparse figure NVIDIA prints. Memory sizes are the
  // marketed capacities: "80GB" parts expose 80 GiB (nvidia-smi: 81920 MiB on A100 80GB).
  // L2: "40 MB" on A100 (NVIDIA A100 Tensor Core GPU Architecture whitepaper), "50 MB" on H100
  // SXM5 and PCIe (NVIDIA H100 Tensor Core GPU Architecture whitepaper), in MiB as the driver's
  // l2CacheSize reports them (PyTorch on the device tool's H100: 50 MB); H200, whose
  // datasheet gives none, 60 MiB as PyTorch reported it on the device tool's H200 (its notes,
  // KINDS.md, 2026-10-28). B200, GB200 and L40S: none (no source here), so their memory-bound
  // kernels read everything from DRAM; the harness records the size (environment.gpus).
  static const std::vector<GpuSpec> kCatalogue = {
      // A100 SXM4 80GB: 312 TFLOP/s BF16/FP16, 156 TF32, 2.039 TB/s HBM2e (hardware.md C2).
      {"A100-SXM4-80GB",
       {{"bf16", 312e12}, {"fp16", 312e12}, {"tf32", 156e12}},
       Bytes::GiB(80),
       2.039e12,
       false,
       108,
       Bytes::MiB(40)},
      // A100 SXM4 40GB: same compute, 1.555 TB/s HBM2 (C2).
      {"A100-SXM4-40GB",
       {{"bf16", 312e12}, {"fp16", 312e12}, {"tf32", 156e12}},
       Bytes::GiB(40),
       1.555e12,
       false,
       108,
       Bytes::MiB(40)},
      // H100 SXM5 80GB: 989 BF16, 1979 FP8 dense (C1), TF32 494.5 dense, 3.35 TB/s HBM3 (C2).
      {"H100-SXM5-80GB",
       {{"bf16", 989e12}, {"fp16", 989e12}, {"fp8", 1979e12}, {"tf32", 494.5e12}},
       Bytes::GiB(80),
       3.35e12,
       true,
       132,
       Bytes::MiB(50)},
      // H100 PCIe 80GB: 756 BF16, 1513 FP8 dense, 2.0 TB/s HBM2e (C2).
      {"H100-PCIe-80GB",
       {{"bf16", 756e12}, {"fp16", 756e12}, {"fp8", 1513e12}, {"tf32", 378e12}},
       Bytes::GiB(80),
       2.0e12,
       false,
       114,
       Bytes::MiB(50)},
      // H200 SXM 141GB: H100 compute, 141 GB HBM3e at 4.8 TB/s (C2).
      {"H200-SXM-141GB",
       {{"bf16", 989e12}, {"fp16", 989e12}, {"fp8", 1979e12}, {"tf32", 494.5e12}},
       Bytes(141'000'000'000ULL),
       4.8e12,
       true,
       132,
       Bytes::MiB(60)},
      // B200: 2250 BF16, 4500 FP8 dense (C1), 180 GB HBM3e, 7.7 TB/s (C2, secondary source).
      {"B200-SXM-180GB",
       {{"bf16", 2250e12}, {"fp16", 2250e12}, {"fp8", 4500e12}},
       Bytes(180'000'000'000ULL),
       7.7e12,
       true,
       148,
       Bytes{}},
      // GB200 (per GPU of an NVL72): 2450 BF16, 4900 FP8 (C1), 186 GB HBM3e, 8 TB/s (C2, X).
      {"GB200-186GB",
       {{"bf16", 2450e12}, {"fp16", 2450e12}, {"fp8", 4900e12}},
       Bytes(186'000'000'000ULL),
       8.0e12,
       true,
       148,
       Bytes{}},
      // L40S: 362 BF16, 733 FP8 dense, 48 GB GDDR6 at 864 GB/s, no NVLink (C2).
      {"L40S-48GB",
       {{"bf16", 362e12}, {"fp16", 362e12}, {"fp8", 733e12}, {"tf32", 183e12}},
       Bytes::GiB(48),
       0.864e12,
       false,
       142,
       Bytes{}},
  };
  return kCatalogue;
}

std::optional<GpuSpec> find_gpu(const std::string& model) {
  for (const auto& g : gpu_catalogue())
    if (g.model == model) return g;
  return std::nullopt;
}

GpuSpec read_gpu_spec(const JsonRef& ref) {
  if (ref.raw().is_string()) {
    auto name = ref.string();
    if (auto g = find_gpu(name)) return *g;
    std::string known;
    for (const auto& g : gpu_catalogue()) known += (known.empty() ? "" : ", ") + g.model;
    ref.fail("unknown GPU model '" + name + "' (known: " + known + "; or give an object)");
  }
  ObjectReader r(ref);
  GpuSpec g;
  g.model = r.required("model").string();
  auto peaks = r.required("peak_tflops");
  ObjectReader pr(peaks);
  for (const char* dtype : {"bf16", "fp16", "fp8", "tf32", "fp4"})
    if (auto v = pr.optional(dtype))
      g.peak_flops[dtype] = v->positive_at_most(kMaxPeak_TFLOPS) * 1e12;
  pr.finish();
  if (!g.peak_flops.contains("bf16")) peaks.fail("missing required field 'bf16'");
  g.hbm_bytes = r.required("hbm_bytes").bytes();
  if (g.hbm_bytes.count() == 0) ref.child("hbm_bytes").fail("must be greater than zero");
  g.hbm_Bps = r.required("hbm_GBps").positive_at_most(kMaxBandwidth_GBps) * 1e9;
  if (auto n = r.optional("nvls")) g.nvls = n->boolean();
  g.sm_count = static_cast<std::int32_t>(
      std::min<std::int64_t>(r.required("sm_count").positive_integer(), 1'000'000));
  if (auto l2 = r.optional("l2_bytes")) {
    g.l2_bytes = l2->bytes();
    if (g.l2_bytes > g.hbm_bytes) l2->fail("an L2 cache larger than the GPU's memory");
  }
  r.finish();
  return g;
}

}  // namespace meshsim
