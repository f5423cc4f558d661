#include "lt_gemm.hpp"

#include <cuda_fp8.h>

namespace calib {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

GemmBuffers::GemmBuffers(size_t a_elems, size_t b_elems, size_t c_elems, cudaStream_t st) {
  check(cudaMalloc(&a, a_elems * 2), "cudaMalloc A");
  check(cudaMalloc(&b, b_elems * 2), "cudaMalloc B");
  check(cudaMalloc(&c, c_elems * 2), "cudaMalloc C");
  check(cudaMalloc(&ws, kWorkspaceBytes), "cudaMalloc workspace");
  launch_fill(a, a_elems * 2, st);
  launch_fill(b, b_elems * 2, st);
}

GemmBuffers::~GemmBuffers() {
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(ws);
}

LtGemm::LtGemm(cublasLtHandle_t lt, long m, long n, long k, bool fp8, size_t workspace_bytes,
               int sm_count_target)
    : lt_(lt), ws_bytes_(workspace_bytes) {
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  lt_check(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (sm_count_target > 0)
    lt_check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                            &sm_count_target, sizeof(sm_count_target)),
             "SM count target");
  // C (m×n, column-major) = Aᵀ (A stored k×m) · B (k×n).
  lt_check(cublasLtMatrixLayoutCreate(&la_, in, k, m, k), "layout A");
  lt_check(cublasLtMatrixLayoutCreate(&lb_, in, k, n, k), "layout B");
  lt_check(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_16BF, m, n, m), "layout C");
  cublasLtMatmulPreference_t pref;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_,
                                       sizeof(ws_bytes_));
  int found = 0;
  const auto hs =
      cublasLtMatmulAlgoGetHeuristic(lt_, desc_, la_, lb_, lc_, lc_, pref, 1, &heur_, &found);
  found_ = hs == CUBLAS_STATUS_SUCCESS && found > 0;
  cublasLtMatmulPreferenceDestroy(pref);
}

LtGemm::~LtGemm() {
  cublasLtMatrixLayoutDestroy(la_);
  cublasLtMatrixLayoutDestroy(lb_);
  cublasLtMatrixLayoutDestroy(lc_);
  cublasLtMatmulDescDestroy(desc_);
}

void LtGemm::run(const void* a, const void* b, void* c, void* workspace, cudaStream_t st) const {
  const float alpha = 1.f, beta = 0.f;
  lt_check(cublasLtMatmul(lt_, desc_, &alpha, a, la_, b, lb_, &beta, c, lc_, c, lc_, &heur_.algo,
                          workspace, ws_bytes_, st),
           "cublasLtMatmul");
}

}  // namespace calib
