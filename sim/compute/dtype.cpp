#include "compute/dtype.hpp"

#include "core/enum_names.hpp"

namespace meshsim {

std::string_view name_of(DType d) {
  switch (d) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
    case DType::fp8:
      return "fp8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  return parse_by_name<DType>(kAllDTypes, s);
}

double bytes_of(DType d) {
  switch (d) {
    case DType::fp32:
      return 4;
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::fp8:
      return 1;
  }
  return 0;
}

}  // namespace meshsim
