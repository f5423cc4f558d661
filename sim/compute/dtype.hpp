#pragma once
// Number formats a kernel computes in and a tensor is stored in.
#include <array>
#include <optional>
#include <string_view>

namespace meshsim {

enum class DType { fp32, bf16, fp16, fp8 };

inline constexpr std::array kAllDTypes{DType::fp32, DType::bf16, DType::fp16, DType::fp8};

std::string_view name_of(DType d);
std::optional<DType> parse_dtype(std::string_view s);
// Bytes of one element.
double bytes_of(DType d);

// The dtype of what an FP8 recipe leaves unquantized (a checkpoint's embeddings and LM head; in
// training the attention core, the router and the output layer): 16-bit for FP8, the same dtype
// otherwise.
inline DType unquantized_dtype(DType weights) {
  return weights == DType::fp8 ? DType::bf16 : weights;
}

}  // namespace meshsim
