#pragma once
// The kernel parameters meshsim uses when no calibration profile is given: the bundled
// profiles topologies/calibration/{h100-sxm,a100-sxm}-default.json, fitted by `meshsim
// calibrate fit` to Vidur's published per-operator measurements (validation/kernels/, from
// ../shared/measurements) and compiled into the library. A100-class GPUs use the A100 fit;
// every other GPU (H100, H200, B200, GB200, L40S, ...) uses the H100 fit's fractions with its
// own peak FLOP/s, HBM bandwidth and SM count — scaled from its specification, not measured,
// and `bundled_kernel_source` says so.
#include <string>

#include "compute/calibration_profile.hpp"
#include "compute/kernel_params.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

KernelParams bundled_kernel_params(const GpuSpec& gpu);
// One line: which bundled fit applies to `gpu` and whether it was measured on it.
std::string bundled_kernel_source(const GpuSpec& gpu);
// The bundled profile itself (gpu, source, model), as compiled in.
const CalibrationProfile& bundled_profile(const GpuSpec& gpu);

}  // namespace meshsim
