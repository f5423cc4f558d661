#include "core/units.hpp"

#include <algorithm>

namespace meshsim {

Time Time::from_seconds_ceil(double seconds) {
  if (!(seconds > 0.0)) return Time(0);  // also maps NaN to zero rather than UB in the cast
  // Values that are a whole number of ticks up to floating-point noise (100e-9 s * 1e12 =
  // 100000.00000000001) must not gain a tick.
  const double exact = seconds * 1e12;
  // Round half to even, as std::nearbyint does in the default rounding mode, without its libm
  // call: adding and taking away 2^52 leaves no fraction bits (exact below 2^52; above it every
  // double is whole).
  constexpr double k2p52 = 4503599627370496.0;
  const double nearest = exact < k2p52 ? (exact + k2p52) - k2p52 : exact;
  const double ticks =
      std::fabs(exact - nearest) <= 1e-9 * std::max(1.0, nearest) ? nearest : std::ceil(exact);
  if (ticks >= static_cast<double>(std::numeric_limits<std::int64_t>::max())) return Time::max();
  return Time(static_cast<std::int64_t>(ticks));
}

Time transfer_time(Bytes bytes, double bandwidth_Bps) {
  if (bytes.count() == 0) return Time::zero();
  if (!(bandwidth_Bps > 0.0)) return Time::max();
  return Time::from_seconds_ceil(bytes.as_double() / bandwidth_Bps);
}

}  // namespace meshsim
