// Attention forward and backward over (sequence, heads per TP rank) at head dim 128, causal.
//
// cuDNN's fused SDPA is reached through the cudnn-frontend graph API, a header library that
// this toolkit does not ship; the harness therefore times the documented fallback, unfused
// attention from cuBLAS: forward S = QKᵀ, softmax, O = PV (the s×s scores go through HBM);
// backward dV = PᵀdO, dP = dOVᵀ, softmax backward, dQ = dS·K, dK = dSᵀQ. Rows are marked
// "implementation": "unfused"; `meshsim calibrate fit` leaves them out unless asked, because
// meshsim models the fused kernel. FLOPs are counted as meshsim counts attention (4·b·s²·h·d
// forward, halved for causal; backward 2.5×), so the rate is comparable with fused figures.
#include <cublas_v2.h>

#include "harness.hpp"

namespace calib {
namespace {

void blas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

// Batched bf16 GEMM with fp32 accumulation, column-major.
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, long m, long n, long k,
          const void* a, long lda, long sa, const void* b, long ldb, long sb, void* c, long ldc,
          long sc, long batch) {
  const float one = 1.f, zero = 0.f;
  blas_check(cublasGemmStridedBatchedEx(
                 h, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one, a,
                 CUDA_R_16BF, static_cast<int>(lda), sa, b, CUDA_R_16BF, static_cast<int>(ldb), sb,
                 &zero, c, CUDA_R_16BF, static_cast<int>(ldc), sc, static_cast<int>(batch),
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmStridedBatchedEx");
}

}  // namespace

void bench_attention(const Options& o, Json& out, std::vector<std::string>& notes) {
  check(cudaSetDevice(0), "cudaSetDevice");
  notes.push_back(
      "attention: cuDNN fused SDPA needs the cudnn-frontend header (not in this toolkit); rows "
      "time the unfused cuBLAS fallback (implementation: unfused)");
  cudaStream_t st;
  check(cudaStreamCreate(&st), "cudaStreamCreate");
  cublasHandle_t h;
  blas_check(cublasCreate(&h), "cublasCreate");
  blas_check(cublasSetStream(h, st), "cublasSetStream");
  Json rows = out.value("attention", Json::array());
  const long d = o.head_dim;
  for (long tp : {1L, 2L, 4L, 8L}) {
    const long heads = o.heads / tp;
    if (heads < 1) continue;
    for (long s : {1024L, 2048L, 4096L, 8192L}) {
      const size_t vec = static_cast<size_t>(heads * s * d) * 2;    // one of Q, K, V, O, ...
      const size_t score = static_cast<size_t>(heads * s * s) * 2;  // P (and dP)
      size_t free_b = 0, total_b = 0;
      check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
      if (8 * vec + 2 * score > free_b * 9 / 10) {
        notes.push_back("attention: seq " + std::to_string(s) + " × " + std::to_string(heads) +
                        " heads does not fit in free memory; skipped");
        continue;
      }
      void *q, *k, *v, *ob, *dob, *dq, *dk, *dv, *p, *dp;
      for (void** x : {&q, &k, &v, &ob, &dob, &dq, &dk, &dv})
        check(cudaMalloc(x, vec), "cudaMalloc");
      check(cudaMalloc(&p, score), "cudaMalloc P");
      check(cudaMalloc(&dp, score), "cudaMalloc dP");
      for (void* x : {q, k, v, dob}) launch_fill(x, vec, st);
      const long sv = s * d, ss = s * s;
      // Row-major X[s][d] is column-major Xᵀ (d×s, ld d).
      const auto forward = [&] {
        gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, s, s, d, k, d, sv, q, d, sv, p, s, ss, heads);  // Sᵀ
        launch_softmax(p, heads * s, s, true, st);
        gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d, s, s, v, d, sv, p, s, ss, ob, d, sv, heads);  // Oᵀ
      };
      const auto backward = [&] {
        gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, d, s, s, dob, d, sv, p, s, ss, dv, d, sv, heads);  // dV
        gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, s, s, d, v, d, sv, dob, d, sv, dp, s, ss, heads);  // dP
        launch_softmax_backward(p, dp, heads * s, s, st);
        gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d, s, s, k, d, sv, dp, s, ss, dq, d, sv, heads);  // dQ
        gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, d, s, s, q, d, sv, dp, s, ss, dk, d, sv, heads);  // dK
      };
      const double f_us = time_us(st, o, forward);
      const double b_us = time_us(st, o, backward);
      const double fwd_flops = 4.0 * static_cast<double>(s) * static_cast<double>(s) *
                               static_cast<double>(heads * d) * 0.5;
      for (const auto& [dir, us, flops] :
           {std::tuple{"forward", f_us, fwd_flops}, std::tuple{"backward", b_us, 2.5 * fwd_flops}})
        rows.push_back({{"dtype", "bf16"},
                        {"batch", 1},
                        {"seq_q", s},
                        {"seq_kv", s},
                        {"heads", heads},
                        {"kv_heads", heads},
                        {"head_dim", d},
                        {"causal", true},
                        {"direction", dir},
                        {"time_us", us},
                        {"tflops", flops / (us * 1e-6) / 1e12},
                        {"implementation", "unfused"}});
      for (void* x : {q, k, v, ob, dob, dq, dk, dv, p, dp}) cudaFree(x);
    }
  }
  out["attention"] = rows;
  cublasDestroy(h);
  cudaStreamDestroy(st);
}

}  // namespace calib
