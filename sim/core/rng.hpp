#pragma once
// Deterministic randomness and hashing. Nothing in meshsim may depend on std::hash, pointer
// values or an unseeded generator: same inputs, same output bytes (DESIGN.md).
#include <cstdint>

namespace meshsim {

// SplitMix64 finaliser (Steele, Lea, Flood 2014): a fixed, well-mixed 64-bit hash.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr std::uint64_t hash_combine(std::uint64_t seed, std::uint64_t v) {
  return mix64(seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

// A small seeded generator (SplitMix64 sequence); satisfies UniformRandomBitGenerator.
class Rng {
 public:
  using result_type = std::uint64_t;
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, unbiased enough for fuzzing and
  // sampling; not for cryptography).
  std::uint64_t below(std::uint64_t n) {
    __extension__ typedef unsigned __int128 U128;  // GCC/Clang extension, silenced for -Wpedantic
    return static_cast<std::uint64_t>((static_cast<U128>((*this)()) * n) >> 64);
  }
  double uniform01() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

}  // namespace meshsim
