#pragma once
// One GPU kernel as the compute model sees it: how much arithmetic and memory traffic it does,
// and, for GEMMs and attention, the shape that decides how efficiently the hardware runs it.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "compute/dtype.hpp"

namespace meshsim {

enum class KernelKind { none, gemm, attention, memory_bound };
std::string_view name_of(KernelKind k);

// What a memory-bound kernel does decides how close to HBM bandwidth it runs and what it costs
// at small sizes (../shared/measurements: vLLM's RMSNorm reaches ~1 TB/s on H100 where a residual
// add reaches 3.2): each class has its own fixed cost, achievable bandwidth and floor
// (compute/kernel_params.hpp).
enum class MemoryClass : std::uint8_t {
  elementwise,  // residual adds, dropout, casts, copies
  activation,   // SiLU·mul, GELU
  norm,         // RMSNorm, LayerNorm (a reduction per token)
  rotary,       // rotary position embedding on Q and K
  gather,       // embedding lookup (vocabulary-parallel masked lookup under TP)
  softmax,      // unfused attention softmax, cross-entropy
  kv_append,    // writing new tokens' K/V into the paged KV cache
  optimizer,    // Adam update over parameters, gradients and moments
};
inline constexpr std::size_t kMemoryClassCount = 8;
inline constexpr std::array<MemoryClass, kMemoryClassCount> kAllMemoryClasses{
    MemoryClass::elementwise, MemoryClass::activation, MemoryClass::norm,
    MemoryClass::rotary,      MemoryClass::gather,     MemoryClass::softmax,
    MemoryClass::kv_append,   MemoryClass::optimizer};
std::string_view name_of(MemoryClass c);
std::optional<MemoryClass> parse_memory_class(std::string_view s);

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
  // Causal queries spread evenly over the sequence, not its last seq_q positions: context
  // parallelism's load-balanced chunks (the sequence cut into 2·cp chunks, CP rank i holding
  // chunks i and 2·cp−1−i: Megatron-Core's CP, Llama 3 paper §3.3.2), so each rank's queries
  // attend seq_kv/2 keys on average, the same work on every rank.
  bool balanced = false;
};

// Keys one query attends on average: all seq_kv without a mask; under a causal mask those
// before it, the chunk being the sequence's last seq_q positions (a prefill chunk over its
// context: seq_kv − seq_q/2) or, balanced, spread over it (seq_kv/2).
double attended_keys(const AttentionShape& s);

// One query per sequence, forward: the decode kernel (compute/kernel_time.hpp prices it by its
// KV reads, not as a prefill).
inline bool is_decode(const AttentionShape& s) {
  return s.seq_q == 1 && !s.backward;
}

struct Kernel {
  KernelKind kind = KernelKind::none;
  DType dtype = DType::bf16;
  MemoryClass memory_class = MemoryClass::elementwise;  // memory-bound kernels only
  double flops = 0;  // arithmetic the hardware executes (recomputation inside the kernel included)
  double bytes = 0;  // HBM bytes read plus written
  GemmShape gemm;
  AttentionShape attention;

  bool empty() const { return kind == KernelKind::none; }
};

// 2·M·N·K FLOPs per problem; reads A and B, writes C, all in `dtype` (output in bf16 for fp8
// inputs, as cuBLASLt FP8 GEMMs in training write bf16).
Kernel gemm_kernel(GemmShape shape, DType dtype);

// FlashAttention FLOPs (Dao 2022; reference/network-model.md): forward 4·b·s_q·s_kv·heads·d;
// causal masks are bottom-right aligned (the s_q queries are the last of the s_kv positions, as
// for a prefill chunk after cached context) and the kernel skips fully masked blocks, so causal
// counts 4·b·heads·d·s_q·(s_kv − s_q/2): half of s² when s_q = s_kv. A query length of 1 is a
// decode kernel (compute/kernel_time.hpp prices it by its KV reads). Backward 2.5× forward
// (two GEMMs of the forward recomputed plus three gradient GEMMs). Bytes: Q, K, V, O (and dO, dQ,
// dK, dV backward) once each; the s×s scores never reach HBM.
Kernel attention_kernel(AttentionShape shape, DType dtype);

// An elementwise, normalization or copy kernel of class `c`: time is its bytes over the class's
// achievable bandwidth plus the class's fixed cost.
Kernel memory_kernel(MemoryClass c, double bytes, double flops = 0);

}  // namespace meshsim
