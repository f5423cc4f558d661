#pragma once
// Time of one kernel on one GPU: a roofline whose compute side is derated by shape-dependent
// efficiency,
//   t = max(FLOPs / (peak(dtype) · efficiency(shape)), bytes / (HBM bandwidth · fraction))
//       + launch overhead,
// with efficiency from the default curves (default_efficiency.hpp) and, where a calibration
// profile has measured points, corrected so that every measured shape gets exactly its measured
// time (corrections in between are interpolated, inverse-distance weighted in log-shape space).
#include <optional>
#include <string>

#include "compute/calibration_profile.hpp"
#include "compute/default_efficiency.hpp"
#include "compute/kernel.hpp"
#include "core/units.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

class ComputeModel {
 public:
  explicit ComputeModel(GpuSpec gpu, std::optional<CalibrationProfile> profile = std::nullopt);

  Time time(const Kernel& k) const;
  double seconds(const Kernel& k) const;

  // Peak dense FLOP/s of `dtype`; an Error when this GPU has no tensor-core rate for it.
  double peak_flops(DType dtype) const;
  double memory_bandwidth_Bps() const;
  Time launch_overhead() const;
  // Fraction of peak the compute side reaches, before the roofline and the overhead.
  double gemm_efficiency(const GemmShape& shape, DType dtype) const;
  double attention_efficiency(const AttentionShape& shape) const;

  const GpuSpec& gpu() const { return gpu_; }
  const DefaultEfficiency& defaults() const { return defaults_; }
  const std::optional<CalibrationProfile>& profile() const { return profile_; }
  // One line: where the numbers come from.
  std::string describe() const;

 private:
  double uncorrected_seconds(const Kernel& k) const;
  double correction(const Kernel& k) const;

  GpuSpec gpu_;
  DefaultEfficiency defaults_;
  std::optional<CalibrationProfile> profile_;
};

}  // namespace meshsim
