#pragma once
// Fitting the kernel parameters (compute/kernel_params.hpp) to measured kernels: each part of
// the model by Nelder–Mead on the mean absolute log error of its kernels' times (robust to the
// outliers of a library's kernel selection), starting from and falling back to `base`:
//  - GEMM (16-bit): fraction, k_half, intensity_half, memory_fraction, fixed cost from 16 or more
//    kernels; with fewer, the fraction alone. FP8 kernels fit the FP8 fraction alone.
//  - each memory-bound class with 3 or more kernels: bandwidth fraction, fixed cost, floor;
//  - prefill attention: fraction, kv_half, per-tile time and fixed cost from 8 or more forward
//  kernels, the
//    fraction alone from fewer; backward kernels fit the backward ratio;
//  - decode attention from 3 or more kernels: bandwidth fraction, fixed and per-sequence cost.
// Parts without measurements keep `base` and are left out of the fitted `model` JSON.
#include <string>
#include <vector>

#include "compute/kernel.hpp"
#include "compute/kernel_params.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

struct MeasuredKernel {
  Kernel kernel;
  double seconds = 0;
  std::string group;        // what it was measured on (a model), for leave-one-out checks
  std::string layer;        // kernels of one layer's forward share this
  std::string op;           // the op catalogue's name
  std::int64_t tokens = 0;  // tokens of the forward pass it belongs to (0: not given)
};

struct KernelFit {
  KernelParams params;
  Json model = Json::object();  // the fitted parts, as a profile's `model` section
  std::vector<std::string> lines;
};

KernelFit fit_kernel_params(const std::vector<MeasuredKernel>& rows, const GpuSpec& gpu,
                            const KernelParams& base);

// |log(predicted / measured)| of each row under `params`, in row order.
std::vector<double> log_errors(const std::vector<MeasuredKernel>& rows, const GpuSpec& gpu,
                               const KernelParams& params);

}  // namespace meshsim
