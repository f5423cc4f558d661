#include "core/rng.hpp"

namespace meshsim {

Rng::result_type Rng::operator()() {
  state_ += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__extension__ typedef unsigned __int128 U128;  // GCC/Clang extension, silenced for -Wpedantic

std::uint64_t Rng::below(std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<U128>((*this)()) * n) >> 64);
}

double Rng::uniform01() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

}  // namespace meshsim
