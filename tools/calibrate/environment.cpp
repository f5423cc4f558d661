// What the numbers were measured on: driver, CUDA runtime, NCCL and cuBLASLt versions, and per
// GPU its name, SM count, memory, clocks and compute capability.
#include <cublasLt.h>
#include <nccl.h>

#include "harness.hpp"

namespace calib {

Json environment() {
  Json env;
  int driver = 0, runtime = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  env["cuda_driver"] = driver;
  env["cuda_runtime"] = runtime;
  env["nccl"] = nccl;
  env["cublaslt"] = static_cast<long>(cublasLtGetVersion());
  Json gpus = Json::array();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    int clock_khz = 0, mem_clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, d);
    gpus.push_back({{"index", d},
                    {"name", p.name},
                    {"sm_count", p.multiProcessorCount},
                    {"memory_bytes", static_cast<double>(p.totalGlobalMem)},
                    {"max_sm_clock_mhz", clock_khz / 1000},
                    {"memory_clock_mhz", mem_clock_khz / 1000},
                    {"memory_bus_width_bits", p.memoryBusWidth},
                    // The kernel model's L2 term (compute/kernel_time.hpp) needs it; the
                    // catalogue has none for some GPUs (topology/gpu_spec.cpp).
                    {"l2_bytes", p.l2CacheSize},
                    {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
                    {"pci_bus_id", p.pciBusID}});
  }
  env["gpus"] = gpus;
  return env;
}

}  // namespace calib
