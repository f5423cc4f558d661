// Cost of the per-op numbers a training simulation asks for thousands of times: a kernel's
// time from the compute model (default curve and with a calibration profile), one layer's op
// catalogue, and the memory model of a whole 405B job.
#include <benchmark/benchmark.h>

#include "compute/compute_model.hpp"
#include "memory/memory_model.hpp"
#include "model/model_loader.hpp"
#include "model/op_catalogue.hpp"

namespace {

using namespace meshsim;

std::string path(const std::string& rel) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + rel;
}

void BM_GemmTimeDefault(benchmark::State& state) {
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto k = gemm_kernel({8192, 10240, 8192, 1}, DType::bf16);
  for (auto _ : state) benchmark::DoNotOptimize(cm.time(k));
}
BENCHMARK(BM_GemmTimeDefault);

// A decode-sized GEMM: no tile fills the GPU, so the scan over the menu cannot stop early as it
// does for the training GEMM above; with 8 rows the three taller tiles lose to their half-height
// ones without being priced, and three of the six are.
void BM_GemmTimeDefaultDecode(benchmark::State& state) {
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto k = gemm_kernel({8, 10240, 8192, 1}, DType::bf16);
  for (auto _ : state) benchmark::DoNotOptimize(cm.time(k));
}
BENCHMARK(BM_GemmTimeDefaultDecode);

// A profile as the harness writes it: the four GEMMs of a Llama 70B layer at TP 1, 2, 4, 8 and
// 1 … 16384 tokens (240 measured points; times from the model ×1.1 so every correction is on).
CalibrationProfile harness_like_profile() {
  const ComputeModel plain(*find_gpu("H100-SXM5-80GB"));
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.file = "bench.json";
  for (std::int64_t tp : {1, 2, 4, 8})
    for (std::int64_t m = 1; m <= 16384; m *= 2)
      for (auto [n, k] : {std::pair{10240 / tp, 8192L},
                          {8192L, 8192 / tp},
                          {57344 / tp, 8192L},
                          {8192L, 28672 / tp}}) {
        const auto kernel = gemm_kernel({m, n, k, 1}, DType::bf16);
        p.gemm.push_back({DType::bf16, {m, n, k, 1}, kernel.flops / (1.1 * plain.seconds(kernel))});
      }
  return p;
}

void BM_GemmTimeProfile(benchmark::State& state) {
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"), harness_like_profile());
  const auto k = gemm_kernel({3000, 10240, 8192, 1}, DType::bf16);
  for (auto _ : state) benchmark::DoNotOptimize(cm.time(k));
}
BENCHMARK(BM_GemmTimeProfile);

void BM_MemoryKernelTime(benchmark::State& state) {
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto k = memory_kernel(MemoryClass::norm, 134e6);
  for (auto _ : state) benchmark::DoNotOptimize(cm.time(k));
}
BENCHMARK(BM_MemoryKernelTime);

// Every kernel of one Llama 3.1 405B layer (forward, dgrad, wgrad) at 8192 tokens, TP 8 with SP,
// priced by the default (bundled) model.
void BM_Layer405BKernels(benchmark::State& state) {
  const auto m = load_model(path("workloads/models/llama3.1-405b.json"));
  LayerShape shape;
  shape.seq = 8192;
  const auto ops = layer_ops(m, 0, shape, {8, true, 1, 1});
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  for (auto _ : state) {
    double s = 0;
    for (const auto& op : ops)
      s += cm.seconds(op.forward) + cm.seconds(op.backward_input) + cm.seconds(op.backward_weight);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_Layer405BKernels);

void BM_LayerOps(benchmark::State& state) {
  const auto m = load_model(path("workloads/models/llama3.1-405b.json"));
  LayerShape shape;
  shape.seq = 8192;
  for (auto _ : state) benchmark::DoNotOptimize(layer_ops(m, 0, shape, {8, true, 1, 1}));
}
BENCHMARK(BM_LayerOps);

void BM_TrainingMemory405B(benchmark::State& state) {
  const auto m = load_model(path("workloads/models/llama3.1-405b.json"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=64,tp=8,pp=16,cp=1", "bench");
  c.zero = 1;
  c.sp = true;
  c.schedule = {ScheduleKind::interleaved, 2};
  for (auto _ : state)
    benchmark::DoNotOptimize(
        training_memory_per_stage(m, {8192, 2048, 1, DType::bf16, {}}, c, MemoryOptions{}));
}
BENCHMARK(BM_TrainingMemory405B);

}  // namespace
