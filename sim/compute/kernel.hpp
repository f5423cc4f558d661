#pragma once
// One GPU kernel as the compute model sees it: how much arithmetic and memory traffic it does,
// and, for GEMMs and attention, the shape that decides how efficiently the hardware runs it.
#include <cstdint>
#include <string_view>

#include "compute/dtype.hpp"

namespace meshsim {

enum class KernelKind { none, gemm, attention, memory_bound };
std::string_view name_of(KernelKind k);

// C[M×N] = A[M×K]·B[K×N], `batch` independent problems of that shape (grouped expert GEMMs).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

// Fused (flash) attention of `batch` sequences: queries attend to `seq_kv` keys each.
struct AttentionShape {
  std::int64_t batch = 0, seq_q = 0, seq_kv = 0, heads = 0, head_dim = 0;
  std::int64_t kv_heads = 0;  // grouped-query attention: K and V have fewer heads (0: = heads)
  bool causal = true;
  bool backward = false;
};

struct Kernel {
  KernelKind kind = KernelKind::none;
  DType dtype = DType::bf16;
  double flops = 0;  // arithmetic the hardware executes (recomputation inside the kernel included)
  double bytes = 0;  // HBM bytes read plus written
  GemmShape gemm;
  AttentionShape attention;

  bool empty() const { return kind == KernelKind::none; }
};

// 2·M·N·K FLOPs per problem; reads A and B, writes C, all in `dtype` (output in bf16 for fp8
// inputs, as cuBLASLt FP8 GEMMs in training write bf16).
Kernel gemm_kernel(GemmShape shape, DType dtype);

// FlashAttention FLOPs (Dao 2022; reference/network-model.md): forward 4·b·s_q·s_kv·heads·d,
// halved for causal masks because the kernel skips fully masked blocks; backward 2.5× forward
// (two GEMMs of the forward recomputed plus three gradient GEMMs). Bytes: Q, K, V, O (and dO, dQ,
// dK, dV backward) once each; the s×s scores never reach HBM.
Kernel attention_kernel(AttentionShape shape, DType dtype);

// An elementwise, normalization or copy kernel: time is bytes over achievable HBM bandwidth.
Kernel memory_kernel(double bytes, double flops = 0);

}  // namespace meshsim
