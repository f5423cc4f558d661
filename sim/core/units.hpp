#pragma once
// Units as strong types: simulated time in integer picoseconds, sizes in bytes.
// Integer time gives every event a total order that does not depend on floating-point rounding
// (DESIGN.md "Engine rules"); bandwidth arithmetic is done in double and rounded up to a tick in
// exactly one place, Time::from_seconds_ceil.
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace meshsim {

// An integer count (elements, bytes, tokens) as a double for arithmetic on it: named so the
// many conversions in the memory, model and serving formulas read as one word.
constexpr double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ps(std::int64_t v) { return Time(v); }
  static constexpr Time ns(std::int64_t v) { return Time(v * 1'000); }
  static constexpr Time us(std::int64_t v) { return Time(v * 1'000'000); }
  static constexpr Time ms(std::int64_t v) { return Time(v * 1'000'000'000); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }
  static constexpr Time zero() { return Time(0); }
  // The one place where seconds in double become ticks: rounded up, so a transfer is never
  // reported finished before its last byte could have arrived. Saturates at Time::max().
  static Time from_seconds_ceil(double seconds);

  constexpr std::int64_t picoseconds() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time& operator+=(Time o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ps_ -= o.ps_;
    return *this;
  }
  friend constexpr Time operator+(Time a, Time b) { return Time(a.ps_ + b.ps_); }
  friend constexpr Time operator-(Time a, Time b) { return Time(a.ps_ - b.ps_); }
  friend constexpr Time operator*(Time a, std::int64_t k) { return Time(a.ps_ * k); }
  friend constexpr Time operator*(std::int64_t k, Time a) { return Time(a.ps_ * k); }

 private:
  constexpr explicit Time(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::uint64_t v) : n_(v) {}
  static constexpr Bytes KiB(std::uint64_t v) { return Bytes(v << 10); }
  static constexpr Bytes MiB(std::uint64_t v) { return Bytes(v << 20); }
  static constexpr Bytes GiB(std::uint64_t v) { return Bytes(v << 30); }
  constexpr std::uint64_t count() const { return n_; }
  constexpr double as_double() const { return static_cast<double>(n_); }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes& operator+=(Bytes o) {
    n_ += o.n_;
    return *this;
  }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes(a.n_ + b.n_); }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes(a.n_ - b.n_); }
  friend constexpr Bytes operator*(Bytes a, std::uint64_t k) { return Bytes(a.n_ * k); }
  friend constexpr Bytes operator/(Bytes a, std::uint64_t k) { return Bytes(a.n_ / k); }

 private:
  std::uint64_t n_ = 0;
};

// Time to move `bytes` at `bandwidth_Bps`, rounded up to a tick.
Time transfer_time(Bytes bytes, double bandwidth_Bps);

}  // namespace meshsim
