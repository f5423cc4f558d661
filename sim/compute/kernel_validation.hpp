#pragma once
// How well the kernel model predicts kernels it was not fitted to: leave one group (model) out,
// fit the rest (compute/kernel_fit.hpp), price the held-out group's kernels and layers. Parts of
// the model that no other group measures (attention, measured on one model) are priced by the
// fit to all groups and marked in-sample. The tables of validation/kernels.md.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compute/kernel_fit.hpp"
#include "core/error_stats.hpp"

namespace meshsim {

struct KernelCheck {
  std::string group, op, layer;
  std::string kind;  // "gemm", "attention", "decode" or the memory class
  std::int64_t tokens = 0;
  double measured_s = 0, predicted_s = 0;
  bool held_out = true;  // false: in-sample (no other group measured this kind)
  double error() const { return predicted_s / measured_s - 1.0; }
};

// One layer's forward: the sum of its measured kernels against the sum of their predictions.
struct LayerCheck {
  std::string group, layer;
  std::int64_t tokens = 0;
  double measured_s = 0, predicted_s = 0;
  double error() const { return predicted_s / measured_s - 1.0; }
};

// How much the measurements scatter along a token sweep (one op of one model and TP degree, token
// count varied; the converter names such a layer "MODEL tpT T<tokens>"), per kernel kind: a
// reference for what any model smooth in tokens can reach on them.
struct MeasurementScatter {
  // Each inner point against the straight line (in tokens) through its two neighbours.
  ErrorStats neighbours;
  // The least max |error| any model that never gets faster as tokens grow can have on these
  // sweeps: max over pairs i < j of a sweep (m_i − m_j)/(m_i + m_j) (both priced at the harmonic
  // mean of the two), 0 when every sweep is non-decreasing.
  double monotone_max = 0;
};

struct KernelValidation {
  std::string gpu;
  bool with_points = false;
  std::vector<KernelCheck> kernels;
  std::vector<LayerCheck> layers;
  std::map<std::string, MeasurementScatter> scatter;  // by kind, of every group's measurements
};

// Groups in `always_train` (e.g. standalone microbenchmarks) are never held out. With
// `with_points`, the held-out GEMMs are priced as `calibrate fit` would leave a profile of the
// other groups: the fitted parameters plus their measured GEMM points, which correct shapes
// within kCorrectionRadius of them (compute/compute_model.hpp); without, by the parameters
// alone (what the bundled profiles hold).
KernelValidation leave_one_group_out(const std::vector<MeasuredKernel>& rows, const GpuSpec& gpu,
                                     const KernelParams& base,
                                     const std::vector<std::string>& always_train,
                                     bool with_points = false);

std::map<std::string, MeasurementScatter> measurement_scatter(
    const std::vector<MeasuredKernel>& rows);

// Token bands of the report: 1–16, 17–128, 129–512, 513–2048, 2049+.
std::string token_band(std::int64_t tokens);

std::string kernel_validation_markdown(const std::vector<KernelValidation>& runs,
                                       const std::string& preamble);

}  // namespace meshsim
