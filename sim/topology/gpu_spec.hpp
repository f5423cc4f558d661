#pragma once
// What one GPU can do: the numbers MFU and the roofline need.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "core/units.hpp"

namespace meshsim {

struct GpuSpec {
  std::string model;
  // Dense (non-sparse) peak FLOP/s per dtype ("bf16", "fp16", "fp8", "tf32"), as NVIDIA uses
  // for MFU (validation/hardware.md C1, C2).
  std::map<std::string, double, std::less<>> peak_flops;  // by dtype name; find() takes a view
  Bytes hbm_bytes;
  double hbm_Bps = 0;
  // NVLink SHARP (NVLS): in-switch reduction and multicast, Hopper and later with NVSwitch
  // (NVIDIA/nccl: NVLS needs compute capability >= 9.0 and NVSwitch).
  bool nvls = false;
  // Streaming multiprocessors: the unit of GEMM wave quantization (CUDA programming guide,
  // compute capability tables; NVIDIA architecture whitepapers for the per-SKU counts).
  std::int32_t sm_count = 0;
  // Last-level (L2) cache, as the driver reports it (cudaDeviceProp::l2CacheSize); 0 when no
  // source gives it. A memory-bound kernel whose traffic fits reads its input from it
  // (compute/kernel_time.hpp).
  Bytes l2_bytes;
};

// The built-in catalogue, from ../shared/validation/hardware.md tables C1 and C2.
const std::vector<GpuSpec>& gpu_catalogue();
std::optional<GpuSpec> find_gpu(const std::string& model);

// A GPU field of a topology file: a catalogue name ("H100-SXM5-80GB") or an object
// {model, peak_tflops {dtype: TFLOP/s}, hbm_bytes, hbm_GBps, sm_count, nvls, l2_bytes?}.
GpuSpec read_gpu_spec(const JsonRef& ref);

}  // namespace meshsim
