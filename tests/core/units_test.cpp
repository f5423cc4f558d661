#include "core/units.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace meshsim;

TEST_CASE("Time constructors agree on picoseconds") {
  CHECK(Time::ns(1).picoseconds() == 1'000);
  CHECK(Time::us(3).picoseconds() == 3'000'000);
  CHECK(Time::ms(2).picoseconds() == 2'000'000'000);
  CHECK(Time::us(1) + Time::ns(500) == Time::ps(1'500'000));
  CHECK(Time::us(2) - Time::us(1) == Time::us(1));
  CHECK(Time::ns(3) * 4 == Time::ns(12));
  CHECK(Time::us(1) < Time::us(2));
}

TEST_CASE("from_seconds_ceil rounds up to the next picosecond") {
  CHECK(Time::from_seconds_ceil(1e-12) == Time::ps(1));
  CHECK(Time::from_seconds_ceil(1.5e-12) == Time::ps(2));  // a transfer never ends early
  CHECK(Time::from_seconds_ceil(0.0) == Time::zero());
  CHECK(Time::from_seconds_ceil(-1.0) == Time::zero());
  CHECK(Time::from_seconds_ceil(1e30) == Time::max());  // saturates instead of overflowing
}

TEST_CASE("transfer_time is bytes over bandwidth") {
  // 1 GiB at 100 GB/s = 1073741824 / 1e11 s = 10.73741824 ms = 10737418240 ps exactly.
  CHECK(transfer_time(Bytes::GiB(1), 100e9) == Time::ps(10'737'418'240));
  CHECK(transfer_time(Bytes(0), 0.0) == Time::zero());
  CHECK(transfer_time(Bytes(1), 0.0) == Time::max());
}

TEST_CASE("Bytes arithmetic") {
  CHECK(Bytes::KiB(1).count() == 1024);
  CHECK(Bytes::MiB(64).count() == 64ull << 20);
  CHECK((Bytes::GiB(1) + Bytes::GiB(1)) == Bytes::GiB(2));
  CHECK(Bytes::GiB(8) / 8 == Bytes::GiB(1));
}

TEST_CASE("from_seconds_ceil does not add a tick for floating-point noise") {
  // 100e-9 * 1e12 evaluates to 100000.00000000001 in double.
  CHECK(Time::from_seconds_ceil(100e-9) == Time::ns(100));
  CHECK(Time::from_seconds_ceil(500e-9) == Time::ns(500));
  CHECK(Time::from_seconds_ceil(100.4e-12) == Time::ps(101));
}

// The rule above, written with std::nearbyint as it was before the price stopped calling libm.
static std::int64_t reference_ticks(double seconds) {
  const double exact = seconds * 1e12;
  const double nearest = std::nearbyint(exact);
  return static_cast<std::int64_t>(
      std::fabs(exact - nearest) <= 1e-9 * std::max(1.0, nearest) ? nearest : std::ceil(exact));
}

TEST_CASE("from_seconds_ceil's nearest tick is std::nearbyint's, below and above 2^52 ticks") {
  // Half-way values (ties go to even), values just off a tick, and values past 2^52 ps (about
  // 75 minutes), where every double is a whole number of ticks.
  for (const double ps :
       {0.5, 1.5, 2.5, 1e6 + 0.5, 1e6 + 1e-4, 1e6 - 1e-4, 123456789.49999, 4503599627370495.5,
        4503599627370496.0, 4503599627370497.0, 9007199254740994.0, 1e17 + 64})
    CHECK(Time::from_seconds_ceil(ps * 1e-12).picoseconds() == reference_ticks(ps * 1e-12));
  // A sweep of kernel-sized times, 1 ns to 10 s, on a grid that lands near and between ticks.
  std::int64_t mismatches = 0;
  for (double s = 1e-9; s < 10; s *= 1.0007)
    mismatches += Time::from_seconds_ceil(s).picoseconds() != reference_ticks(s);
  CHECK(mismatches == 0);
}

TEST_CASE("as_double converts a count exactly below 2^53") {
  CHECK(meshsim::as_double(0) == 0.0);
  CHECK(meshsim::as_double(-3) == -3.0);
  CHECK(meshsim::as_double(std::int64_t{1} << 52) == 4503599627370496.0);
}
