#include "model/model_spec.hpp"

namespace meshsim {

std::string_view name_of(Activation a) {
  return a == Activation::gelu ? "gelu" : "swiglu";
}
std::string_view name_of(Norm n) {
  return n == Norm::layernorm ? "layernorm" : "rmsnorm";
}
std::string_view name_of(Positions p) {
  return p == Positions::learned ? "learned" : "rope";
}

}  // namespace meshsim
