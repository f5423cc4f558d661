// Device kernels of the harness: STREAM triad, buffer fill, the softmax of the unfused
// attention fallback, and SM-holding blocks for the interference section.
#include <cuda_bf16.h>

#include "harness.hpp"

namespace calib {
namespace {

__global__ void triad(float* a, const float* b, const float* c, float s, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(blockDim.x) * gridDim.x)
    a[i] = b[i] + s * c[i];
}

__global__ void fill(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(blockDim.x) * gridDim.x)
    p[i] = static_cast<unsigned char>(0x3c);  // small positive bf16/fp8 bit patterns
}

// Reduces `v` over the block (max or sum) and returns the result to every thread.
template <bool Max>
__device__ float block_reduce(float v, float* red) {
  for (int o = 16; o > 0; o /= 2) {
    const float other = __shfl_xor_sync(0xffffffff, v, o);
    v = Max ? fmaxf(v, other) : v + other;
  }
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : (Max ? -1e30f : 0.f);
    for (int o = 16; o > 0; o /= 2) {
      const float other = __shfl_xor_sync(0xffffffff, v, o);
      v = Max ? fmaxf(v, other) : v + other;
    }
    if (threadIdx.x == 0) red[0] = v;
  }
  __syncthreads();
  const float out = red[0];
  __syncthreads();
  return out;
}

// One block per row; the row's max and sum by block reduction.
__global__ void softmax_rows(__nv_bfloat16* x, long cols, bool causal, long seq) {
  const long row = blockIdx.x;
  __nv_bfloat16* r = x + row * cols;
  const long limit = causal ? (row % seq) + 1 : cols;
  __shared__ float red[32];
  float m = -1e30f;
  for (long j = threadIdx.x; j < limit; j += blockDim.x) m = fmaxf(m, __bfloat162float(r[j]));
  m = block_reduce<true>(m, red);
  float s = 0;
  for (long j = threadIdx.x; j < limit; j += blockDim.x) s += __expf(__bfloat162float(r[j]) - m);
  s = block_reduce<false>(s, red);
  const float inv = 1.f / s;
  for (long j = threadIdx.x; j < cols; j += blockDim.x)
    r[j] = __float2bfloat16(j < limit ? __expf(__bfloat162float(r[j]) - m) * inv : 0.f);
}

__global__ void softmax_rows_backward(const __nv_bfloat16* p, __nv_bfloat16* dp, long cols) {
  const long row = blockIdx.x;
  const __nv_bfloat16* pr = p + row * cols;
  __nv_bfloat16* dr = dp + row * cols;
  __shared__ float red[32];
  float s = 0;
  for (long j = threadIdx.x; j < cols; j += blockDim.x)
    s += __bfloat162float(pr[j]) * __bfloat162float(dr[j]);
  s = block_reduce<false>(s, red);
  const float dot = s;
  for (long j = threadIdx.x; j < cols; j += blockDim.x)
    dr[j] = __float2bfloat16(__bfloat162float(pr[j]) * (__bfloat162float(dr[j]) - dot));
}

__global__ void hold_sm(long long cycles, int* started) {
  extern __shared__ unsigned char held[];
  if (threadIdx.x == 0) {
    atomicAdd_system(started, 1);
    held[0] = 1;
  }
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Spins one warp until the global timer (ns, PTX %globaltimer) has advanced `ns` since it
// started: a kernel of known length, whatever the clocks do.
__global__ void spin_ns(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<long long>(now - start) < ns);
}

__global__ void empty_kernel() {}

unsigned blocks_for(size_t n) {
  const size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 * 8 ? b : 65535 * 8);
}

}  // namespace

void launch_triad(float* a, const float* b, const float* c, float s, size_t n, cudaStream_t st) {
  triad<<<blocks_for(n), 256, 0, st>>>(a, b, c, s, n);
  check(cudaGetLastError(), "triad kernel");
}

void launch_fill(void* p, size_t bytes, cudaStream_t st) {
  fill<<<blocks_for(bytes), 256, 0, st>>>(static_cast<unsigned char*>(p), bytes);
  check(cudaGetLastError(), "fill kernel");
}

void launch_hold_sms(int blocks, long long cycles, int* started, cudaStream_t st) {
  int device = 0, smem = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "max shared memory per block");
  check(cudaFuncSetAttribute(hold_sm, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        "hold_sm shared memory");
  hold_sm<<<blocks, 32, static_cast<size_t>(smem), st>>>(cycles, started);
  check(cudaGetLastError(), "hold_sm kernel");
}

void launch_spin(long long ns, cudaStream_t st) {
  spin_ns<<<1, 32, 0, st>>>(ns);
  check(cudaGetLastError(), "spin kernel");
}

void launch_empty(cudaStream_t st) {
  empty_kernel<<<1, 32, 0, st>>>();
  check(cudaGetLastError(), "empty kernel");
}

void launch_softmax(void* scores, long rows, long cols, bool causal, cudaStream_t st) {
  softmax_rows<<<static_cast<unsigned>(rows), 256, 0, st>>>(static_cast<__nv_bfloat16*>(scores),
                                                            cols, causal, cols);
  check(cudaGetLastError(), "softmax kernel");
}

void launch_softmax_backward(const void* p, void* dp, long rows, long cols, cudaStream_t st) {
  softmax_rows_backward<<<static_cast<unsigned>(rows), 256, 0, st>>>(
      static_cast<const __nv_bfloat16*>(p), static_cast<__nv_bfloat16*>(dp), cols);
  check(cudaGetLastError(), "softmax backward kernel");
}

}  // namespace calib
