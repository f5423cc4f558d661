#pragma once
// Time of one kernel on one GPU: the kernel model of compute/kernel_time.hpp with the GPU's
// kernel parameters — the bundled fit for its class (compute/bundled_profiles.hpp), with a
// calibration profile's fitted `model` laid over it — and, where the profile has measured GEMM
// or attention points, a local correction: each measured shape gets exactly its measured time,
// shapes within `kCorrectionRadius` octaves of measured ones are pulled towards them
// (inverse-distance weights that fade to zero at the radius), shapes further away keep the
// model. bf16, fp16 and fp32 are one class for that lookup; fp8 is its own.
#include <optional>
#include <string>

#include "compute/calibration_profile.hpp"
#include "compute/kernel.hpp"
#include "compute/kernel_params.hpp"
#include "compute/kernel_time.hpp"
#include "compute/measured_points.hpp"
#include "core/units.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

// How far (in log2 units of the shape coordinates) a measured point corrects its neighbours.
inline constexpr double kCorrectionRadius = 1.5;

class ComputeModel {
 public:
  // `taken`: SMs another kernel holds while these kernels run (a collective's CTAs beside
  // them, compute/kernel_time.hpp); its HBM bandwidth is unchanged. Measured points correct
  // the model of the whole GPU.
  explicit ComputeModel(GpuSpec gpu, std::optional<CalibrationProfile> profile = std::nullopt,
                        SmsTaken taken = {});

  Time time(const Kernel& k) const;
  double seconds(const Kernel& k) const;
  // The model alone, without the measured-point correction.
  double model_seconds(const Kernel& k) const;
  // What each kernel costs its stream beyond its own duration when kernels run back to back,
  // launched one by one (the profile's measured `kernel_gap_us`); 0 when no profile measured it
  // (then not modelled: the bundled profiles come from kernel durations alone).
  double kernel_gap_s() const {
    return profile_ && profile_->kernel_gap_s ? *profile_->kernel_gap_s : 0.0;
  }
  // A kernel's time in its stream, launched one by one: its duration and the gap after it.
  Time stream_time(const Kernel& k) const {
    return Time::from_seconds_ceil(seconds(k) + kernel_gap_s());
  }
  // The same between the kernels of a CUDA graph (`graph_kernel_gap_us`); a profile that
  // measured only the eager gap gives that one (an upper bound: a graph removes launch work).
  double graph_kernel_gap_s() const {
    return profile_ && profile_->graph_kernel_gap_s ? *profile_->graph_kernel_gap_s
                                                    : kernel_gap_s();
  }

  // The host's time per kernel it launches: the framework's measured per-kernel host time
  // (`host_per_kernel_us`, from a PyTorch profiler trace), else the harness's bare launch cost
  // (`host_launch_us`, a floor for any framework), else 0: the host is not modelled (the bundled
  // profiles come from kernel durations alone).
  double host_per_kernel_s() const {
    if (!profile_) return 0.0;
    if (profile_->host_per_kernel_s) return *profile_->host_per_kernel_s;
    return profile_->host_launch_s.value_or(0.0);
  }

  // Peak dense FLOP/s of `dtype`; an Error when this GPU has no tensor-core rate for it.
  double peak_flops(DType dtype) const;

  const GpuSpec& gpu() const { return gpu_; }
  const KernelParams& params() const { return params_; }
  const std::optional<CalibrationProfile>& profile() const { return profile_; }
  // Whether the parameters were measured on this GPU (false: scaled from another's fit).
  bool measured_gpu() const { return measured_gpu_; }
  // One line: where the numbers come from.
  std::string describe() const;

 private:
  double correction(const Kernel& k) const;

  GpuSpec gpu_;
  KernelGpu kernel_gpu_;
  SmsTaken taken_;
  KernelParams params_;
  std::optional<CalibrationProfile> profile_;
  MeasuredPoints gemm_points_, attention_points_;
  bool measured_gpu_ = false;
};

}  // namespace meshsim
