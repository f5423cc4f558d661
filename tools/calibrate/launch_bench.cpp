// The time a kernel costs a stream beyond its own duration (../shared/reference/software-stacks.md
// §5 names "a per-kernel launch gap" a calibration target): back-to-back kernels of a known
// length (a warp spinning on the GPU's global timer) in one stream, launched one by one with the
// host ahead of the GPU (`eager`) and replayed as one CUDA graph (`graph`); per kernel, the
// stream's time over the count minus the kernel's length is the gap between two kernels. And the
// host's own cost of a launch (`host`): the CPU time of launching empty kernels into a queue
// that does not fill. The host of a framework adds its dispatch and Python time on top of that
// last figure, which this C++ harness cannot see.
#include <chrono>

#include "harness.hpp"

namespace calib {

void bench_launch(const Options& o, Json& out, std::vector<std::string>& notes) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t st;
  check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  Json rows = out.value("launch", Json::array());
  // 500 kernels of 20 µs or more keep the GPU busy for 10 ms and more, while launching them
  // takes the host a few µs each: the host stays ahead, so the stream's time is the GPU's.
  constexpr int kKernels = 500;
  for (const double kernel_us : {20.0, 50.0}) {
    const auto ns = static_cast<long long>(kernel_us * 1e3);
    const double eager_us = time_us(st, o, [&] {
      for (int i = 0; i < kKernels; ++i) launch_spin(ns, st);
    });
    rows.push_back({{"mode", "eager"},
                    {"kernels", kKernels},
                    {"kernel_us", kernel_us},
                    {"per_kernel_us", eager_us / kKernels}});
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    for (int i = 0; i < kKernels; ++i) launch_spin(ns, st);
    check(cudaStreamEndCapture(st, &graph), "cudaStreamEndCapture");
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
      cudaGetLastError();
      notes.push_back("launch: CUDA graph instantiation failed; graph rows skipped");
    } else {
      const double graph_us = time_us(st, o, [&] { check(cudaGraphLaunch(exec, st), "graph"); });
      rows.push_back({{"mode", "graph"},
                      {"kernels", kKernels},
                      {"kernel_us", kernel_us},
                      {"per_kernel_us", graph_us / kKernels}});
      cudaGraphExecDestroy(exec);
    }
    cudaGraphDestroy(graph);
  }
  // The host's cost of one launch: the CPU time of a burst of empty kernels over its count,
  // median of repeats.
  std::vector<double> host;
  for (int r = 0; r < o.warmup + o.repeats; ++r) {
    check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kKernels; ++i) launch_empty(st);
    const auto t1 = std::chrono::steady_clock::now();
    if (r >= o.warmup) host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  rows.push_back(
      {{"mode", "host"}, {"kernels", kKernels}, {"per_launch_us", median_us(host) / kKernels}});
  cudaStreamDestroy(st);
  out["launch"] = std::move(rows);
}

}  // namespace calib
