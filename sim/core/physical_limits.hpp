#pragma once
// Ceilings on physical quantities read from input files. They are not models of any hardware:
// they sit orders of magnitude above every part built or announced, so that a scaled value
// (GB/s × 1e9, TFLOP/s × 1e12) and everything computed from it stays finite (issue 19: links at
// 1e308 GB/s printed `inf` and left the max-min solver with an unrated flow).

namespace meshsim {

// 1,000,000 GB/s: ~1,000× an NVLink 5 GPU (900 GB/s per direction) and ~125× B200 HBM3e (8 TB/s).
inline constexpr double kMaxBandwidth_GBps = 1e6;
// 1,000,000 TFLOP/s (1 EFLOP/s) per GPU: ~100× a B200's dense FP4 (9 PFLOP/s).
inline constexpr double kMaxPeak_TFLOPS = 1e6;
// 1,000 s for one link hop or one fixed cost: a geostationary satellite hop is ~0.25 s.
inline constexpr double kMaxLatency_s = 1e3;

}  // namespace meshsim
