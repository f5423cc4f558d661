#pragma once
// One cuBLASLt GEMM, C (m×n, bf16) = Aᵀ·B in the "TN" layout cuBLASLt requires for fp8: the
// descriptor, layouts and the heuristic's first algorithm, built once and run many times.
// `sm_count_target` > 0 asks cuBLASLt to plan for that many SMs
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), as Transformer Engine does for a GEMM that leaves SMs
// to a collective.
#include <cublasLt.h>

#include "harness.hpp"

namespace calib {

void lt_check(cublasStatus_t s, const char* what);

// Device buffers for GEMMs of up to `a`, `b` and `c` elements (2 bytes each; A and B filled
// with small values) and a 64 MiB workspace; freed on destruction.
struct GemmBuffers {
  GemmBuffers(size_t a_elems, size_t b_elems, size_t c_elems, cudaStream_t st);
  ~GemmBuffers();
  GemmBuffers(const GemmBuffers&) = delete;
  GemmBuffers& operator=(const GemmBuffers&) = delete;
  void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  static constexpr size_t kWorkspaceBytes = 64ull << 20;
};

class LtGemm {
 public:
  LtGemm(cublasLtHandle_t lt, long m, long n, long k, bool fp8, size_t workspace_bytes,
         int sm_count_target = 0);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // Whether cuBLASLt has an algorithm for it.
  bool ok() const { return found_; }
  void run(const void* a, const void* b, void* c, void* workspace, cudaStream_t st) const;

 private:
  cublasLtHandle_t lt_;
  cublasLtMatmulDesc_t desc_{};
  cublasLtMatrixLayout_t la_{}, lb_{}, lc_{};
  cublasLtMatmulHeuristicResult_t heur_{};
  size_t ws_bytes_;
  bool found_ = false;
};

}  // namespace calib
