#include "core/median.hpp"

#include <doctest/doctest.h>

TEST_CASE("median_of: the middle value, the mean of the two middle ones, 0 when empty") {
  using meshsim::median_of;
  CHECK(median_of({3.0, 1.0, 2.0}) == 2.0);       // odd count, unsorted input
  CHECK(median_of({4.0, 1.0, 3.0, 2.0}) == 2.5);  // even count: (2 + 3) / 2
  CHECK(median_of({7.0}) == 7.0);
  CHECK(median_of({}) == 0.0);
}
