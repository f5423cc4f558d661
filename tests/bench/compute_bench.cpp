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

void BM_GemmTimeProfile(benchmark::State& state) {
  const auto p = load_calibration_profile(path("topologies/calibration/h100-sxm-default.json"));
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"), p);
  const auto k = gemm_kernel({8192, 10240, 8192, 1}, DType::fp8);
  for (auto _ : state) benchmark::DoNotOptimize(cm.time(k));
}
BENCHMARK(BM_GemmTimeProfile);

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
