// GEMM throughput with cuBLASLt over the shapes one transformer layer produces (QKV, output
// projection, MLP up and down at TP 1, 2, 4, 8 and token counts from decode to long prefill) and
// square sizes, in bf16 and, where the GPU has it (compute capability 8.9+), fp8 (E4M3 inputs,
// bf16 output, the "TN" layout cuBLASLt requires for fp8).
#include <set>
#include <tuple>

#include "lt_gemm.hpp"

namespace calib {
namespace {

struct Shape {
  long m, n, k;
  bool operator<(const Shape& o) const { return std::tie(m, n, k) < std::tie(o.m, o.n, o.k); }
};

std::set<Shape> layer_shapes(const Options& o) {
  std::set<Shape> s;
  const long qkv = o.hidden + 2 * o.kv_heads * o.head_dim;
  // Decode sizes one by one up to 64 tokens: a small GEMM's fixed cost and the bandwidth it
  // streams its weights at, which Vidur's three H100 models leave to extrapolation below 13 MB
  // of weights (the kernel-model issue's held-out misses at Llama 2 7B TP 8).
  for (long tokens : {1L, 2L, 4L, 8L, 16L, 32L, 64L, 128L, 1024L, 4096L, 8192L, 16384L})
    for (long tp : {1L, 2L, 4L, 8L}) {
      s.insert({tokens, qkv / tp, o.hidden});
      s.insert({tokens, o.hidden, o.hidden / tp});
      s.insert({tokens, 2 * o.ffn / tp, o.hidden});
      s.insert({tokens, o.hidden, o.ffn / tp});
    }
  for (long n : {1024L, 2048L, 4096L, 8192L, 16384L}) s.insert({n, n, n});
  return s;
}

}  // namespace

void bench_gemm(const Options& o, Json& out, std::vector<std::string>& notes) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const bool fp8 = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
  if (!fp8) notes.push_back("gemm: no fp8 tensor cores (compute capability < 8.9): bf16 only");
  const auto shapes = layer_shapes(o);
  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto& s : shapes) {
    max_a = std::max(max_a, static_cast<size_t>(s.m * s.k));
    max_b = std::max(max_b, static_cast<size_t>(s.k * s.n));
    max_c = std::max(max_c, static_cast<size_t>(s.m * s.n));
  }
  cudaStream_t st;
  check(cudaStreamCreate(&st), "cudaStreamCreate");
  const GemmBuffers buf(max_a, max_b, max_c, st);
  const size_t ws_bytes = GemmBuffers::kWorkspaceBytes;
  cublasLtHandle_t lt;
  lt_check(cublasLtCreate(&lt), "cublasLtCreate");
  Json rows = out.value("gemm", Json::array());
  for (const bool use_fp8 : {false, true}) {
    if (use_fp8 && !fp8) continue;
    for (const auto& s : shapes) {
      const LtGemm gemm(lt, s.m, s.n, s.k, use_fp8, ws_bytes);
      if (!gemm.ok()) {
        notes.push_back("gemm: no cuBLASLt algorithm for " +
                        std::string(use_fp8 ? "fp8 " : "bf16 ") + std::to_string(s.m) + "x" +
                        std::to_string(s.n) + "x" + std::to_string(s.k));
        continue;
      }
      const double us = time_us(st, o, [&] { gemm.run(buf.a, buf.b, buf.c, buf.ws, st); });
      const double flops =
          2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      rows.push_back({{"dtype", use_fp8 ? "fp8" : "bf16"},
                      {"m", s.m},
                      {"n", s.n},
                      {"k", s.k},
                      {"time_us", us},
                      {"tflops", flops / (us * 1e-6) / 1e12}});
    }
  }
  out["gemm"] = rows;
  cublasLtDestroy(lt);
  cudaStreamDestroy(st);
}

}  // namespace calib
