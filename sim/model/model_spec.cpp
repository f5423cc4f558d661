#include "model/model_spec.hpp"

namespace meshsim {

std::string_view name_of(Activation a) {
  switch (a) {
    case Activation::gelu:
      return "gelu";
    case Activation::swiglu:
      return "swiglu";
    case Activation::relu2:
      return "relu2";
  }
  return "gelu";
}
std::string_view name_of(Norm n) {
  return n == Norm::layernorm ? "layernorm" : "rmsnorm";
}
std::string_view name_of(Positions p) {
  return p == Positions::learned ? "learned" : "rope";
}

}  // namespace meshsim
