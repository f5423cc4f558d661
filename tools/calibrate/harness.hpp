#pragma once
// Shared pieces of the calibration harness: error checks that throw (so a missing capability
// becomes a note, never a crash), CUDA-event timing with warm-up and the median of repeats,
// and the sections' entry points.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace calib {

using Json = nlohmann::json;

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Options {
  int warmup = 3;
  int repeats = 10;
  // The model the GEMM and attention shapes come from (default: Llama 3 70B).
  long hidden = 8192, ffn = 28672, heads = 64, kv_heads = 8, head_dim = 128;
  double max_bytes = 8.0 * (1ull << 30);  // largest message / buffer of the sweeps
};

// The middle of `t` (the upper one of an even count), as every harness section reports it.
inline double median_us(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median of `repeats` timings of `body` on `stream` after `warmup` runs, in microseconds.
inline double time_us(cudaStream_t stream, const Options& o, const std::function<void()>& body) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < o.warmup; ++i) body();
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> t;
  for (int i = 0; i < o.repeats; ++i) {
    check(cudaEventRecord(a, stream), "cudaEventRecord");
    body();
    check(cudaEventRecord(b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(1e3 * ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median_us(std::move(t));
}

// Each section appends its rows to `out[section]` and any skipped capability to `notes`.
Json environment();
void bench_gemm(const Options& o, Json& out, std::vector<std::string>& notes);
void bench_attention(const Options& o, Json& out, std::vector<std::string>& notes);
void bench_membw(const Options& o, Json& out, std::vector<std::string>& notes);
void bench_p2p(const Options& o, Json& out, std::vector<std::string>& notes);
void bench_nccl(const Options& o, Json& out, std::vector<std::string>& notes);
void bench_interference(const Options& o, Json& out, std::vector<std::string>& notes);
void bench_launch(const Options& o, Json& out, std::vector<std::string>& notes);
void node_topology(Json& out, std::vector<std::string>& notes);
// NVML, loaded at run time (libnvidia-ml.so.1 ships with the driver, not the toolkit): whether
// two CUDA devices share NVLinks. False without NVML.
int nvlinks_between(int a, int b);

// Device kernels (kernels.cu).
void launch_triad(float* a, const float* b, const float* c, float s, size_t n, cudaStream_t st);
void launch_fill(void* p, size_t bytes, cudaStream_t st);
// One warp spinning for `ns` nanoseconds of the GPU's global timer; an empty kernel.
void launch_spin(long long ns, cudaStream_t st);
void launch_empty(cudaStream_t st);
// Row-wise softmax of `rows` rows of `cols` bf16 scores in place; with `causal`, row r of a
// (seq × seq) block masks columns > r.
void launch_softmax(void* scores, long rows, long cols, bool causal, cudaStream_t st);
// dS = P ⊙ (dP − rowsum(dP ⊙ P)), in place on dP (bf16).
void launch_softmax_backward(const void* p, void* dp, long rows, long cols, cudaStream_t st);
// `blocks` blocks that each hold a whole SM (its maximum shared memory) and spin for `cycles`
// clock cycles; each adds 1 to `*started` (host-mapped) once resident.
void launch_hold_sms(int blocks, long long cycles, int* started, cudaStream_t st);

}  // namespace calib
