#pragma once
// How much memory one piece of work (a step's trace, a search's buffers) may plan to use: a
// documented cap, lowered to three quarters of what this process can have (its address-space
// limit, or the machine's physical memory), so that work estimated past it is an exit-2 error
// with the estimate instead of an out-of-memory kill halfway through.
#include <cstdint>

namespace meshsim {

// The documented cap: 16 GB fits the 24 GiB CI machine; a larger machine does not raise it, so
// the same input gives the same answer on every machine that has at least this much.
inline constexpr double kMaxPlannedBytes = 16e9;

// min(kMaxPlannedBytes, 0.75 × min(RLIMIT_AS, RLIMIT_DATA, physical memory)).
double memory_budget_bytes();

}  // namespace meshsim
