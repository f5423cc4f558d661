#pragma once
// From what the harness measured (tools/calibrate's raw JSON) to a calibration profile:
//  - GEMM and attention points as measured (the median where a shape repeats): the compute
//    model then hits every measured shape exactly and interpolates the corrections between them;
//  - HBM: one α-β fit over the copy/triad sweep: β is the streaming bandwidth, α the per-kernel
//    cost (launch and the tail of a tiny kernel);
//  - links: α-β per point-to-point link class and per (collective, ranks, nodes), per message-
//    size regime (network/alpha_beta.hpp).
#include <optional>
#include <string>
#include <vector>

#include "compute/calibration_profile.hpp"
#include "compute/kernel_fit.hpp"
#include "core/json_reader.hpp"

namespace meshsim {

// The catalogue name of a GPU as CUDA or NVML names it ("NVIDIA H100 80GB HBM3" →
// "H100-SXM5-80GB"); empty when unknown.
std::string catalogue_gpu_name(const std::string& device_name);

struct FitOptions {
  std::string gpu;  // overrides the GPU named in the raw file's environment
  // Attention rows measured with the harness's unfused fallback describe a slower kernel than
  // the fused one meshsim models; they are left out unless asked for.
  bool include_unfused_attention = false;
  // Fit the kernel parameters (compute/kernel_fit.hpp) to the measured kernels, starting from
  // `base` (the GPU's bundled parameters when empty).
  bool fit_model = true;
  std::optional<KernelParams> base;
  // The `model` section of a base profile: parts the fit does not measure are carried over
  // from it into the written profile (JSON merge), so they keep applying.
  std::optional<Json> base_model;
  // Keep the measured GEMM and attention points in the profile: the compute model then hits
  // each of them exactly and corrects shapes near them (compute/compute_model.hpp).
  bool keep_points = true;
};

struct FitResult {
  CalibrationProfile profile;
  std::vector<std::string> lines;        // what was fitted, one line per part, for the user
  std::vector<MeasuredKernel> measured;  // every timed kernel of the raw file, in file order
};

FitResult fit_calibration(const JsonRef& raw, const FitOptions& options);

// Adds an nccl-tests log's rows to `links` as a collective fit (replacing one for the same op,
// ranks and nodes); returns a line describing the fit.
struct NcclTestsLog;
std::string add_collective_fit(LinkCalibration& links, const NcclTestsLog& log);

}  // namespace meshsim
