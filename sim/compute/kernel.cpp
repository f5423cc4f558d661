#include "compute/kernel.hpp"

#include <algorithm>

#include "core/enum_names.hpp"

namespace meshsim {

std::string_view name_of(KernelKind k) {
  switch (k) {
    case KernelKind::none:
      return "none";
    case KernelKind::gemm:
      return "gemm";
    case KernelKind::attention:
      return "attention";
    case KernelKind::memory_bound:
      return "memory_bound";
  }
  return "?";
}

std::string_view name_of(MemoryClass c) {
  switch (c) {
    case MemoryClass::elementwise:
      return "elementwise";
    case MemoryClass::activation:
      return "activation";
    case MemoryClass::norm:
      return "norm";
    case MemoryClass::rotary:
      return "rotary";
    case MemoryClass::gather:
      return "gather";
    case MemoryClass::softmax:
      return "softmax";
    case MemoryClass::kv_append:
      return "kv_append";
    case MemoryClass::optimizer:
      return "optimizer";
  }
  return "?";
}

std::optional<MemoryClass> parse_memory_class(std::string_view s) {
  return parse_by_name<MemoryClass>(kAllMemoryClasses, s);
}

Kernel gemm_kernel(GemmShape shape, DType dtype) {
  Kernel k;
  k.kind = KernelKind::gemm;
  k.dtype = dtype;
  k.gemm = shape;
  const double m = static_cast<double>(shape.m), n = static_cast<double>(shape.n),
               kk = static_cast<double>(shape.k), batch = static_cast<double>(shape.batch);
  k.flops = 2.0 * m * n * kk * batch;
  const double out_bytes = dtype == DType::fp8 ? 2.0 : bytes_of(dtype);
  k.bytes = batch * ((m * kk + kk * n) * bytes_of(dtype) + m * n * out_bytes);
  return k;
}

double attended_keys(const AttentionShape& s) {
  const double sq = static_cast<double>(s.seq_q), skv = static_cast<double>(s.seq_kv);
  if (!s.causal) return skv;
  if (s.balanced) return 0.5 * skv;
  return std::max(skv - 0.5 * sq, 0.5 * sq);
}

Kernel attention_kernel(AttentionShape shape, DType dtype) {
  Kernel k;
  k.kind = KernelKind::attention;
  k.dtype = dtype;
  k.attention = shape;
  const double b = static_cast<double>(shape.batch), sq = static_cast<double>(shape.seq_q),
               skv = static_cast<double>(shape.seq_kv), heads = static_cast<double>(shape.heads),
               d = static_cast<double>(shape.head_dim);
  const double kv_heads = shape.kv_heads > 0 ? static_cast<double>(shape.kv_heads) : heads;
  const double forward = 4.0 * b * sq * attended_keys(shape) * heads * d;
  k.flops = shape.backward ? 2.5 * forward : forward;
  const double q_and_o = 2.0 * b * sq * heads * d, k_and_v = 2.0 * b * skv * kv_heads * d;
  const double tensors = shape.backward ? 2.0 * (q_and_o + k_and_v) : q_and_o + k_and_v;
  k.bytes = tensors * bytes_of(dtype == DType::fp8 ? DType::bf16 : dtype);
  return k;
}

Kernel memory_kernel(MemoryClass c, double bytes, double flops) {
  Kernel k;
  k.kind = KernelKind::memory_bound;
  k.memory_class = c;
  k.bytes = bytes;
  k.flops = flops;
  return k;
}

}  // namespace meshsim
