// Training simulation performance (issue 5 targets):
//  - Llama 3.1 405B on 16,384 H100 (TP 8, PP 16, DP 128, seq 8192, 16M-token batch), folded:
//    one step <= 5 s wall on one core;
//    with the host's launches modelled (BM_Llama405B_16k_Folded_HostLaunches), the same;
//  - Llama 3.1 70B on 512 GPUs (TP 8, PP 4, CP 4, DP 4, seq 32K) with --full: <= 60 s;
//  - issue 17: --full of the main job's winner (Llama 3.1 70B, TP 4 × DP 128 ZeRO-3, seq 8192,
//    128 sequences, 512 H100) <= 30 CPU-s: BM_Llama70B_512_MainWinner_Full;
//  - issue 18: the Perfetto trace of a --full 64-GPU step adds <= 30 % to the step's simulation
//    (BM_Llama70B_64_Full/0 vs /1, and the writer alone, BM_Llama70B_64_TraceOnly; its memory
//    bound is a test, tests/report/chrome_trace_test.cpp).
#include <benchmark/benchmark.h>

#include <ostream>
#include <streambuf>

#include "model/model_loader.hpp"
#include "report/chrome_trace.hpp"
#include "topology/topology_loader.hpp"
#include "training/training_sim.hpp"

namespace {

using namespace meshsim;

std::string path(const std::string& rel) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + rel;
}

TrainingSetup setup(const std::string& mesh, std::int64_t seq, std::int64_t gbs, bool full) {
  TrainingSetup s;
  s.job = {seq, gbs, 1, DType::bf16, true};
  s.config.mesh = parse_mesh(mesh, "bench");
  s.config.sp = true;
  s.config.zero = 1;
  s.full = full;
  return s;
}

void BM_Llama405B_16k_Folded(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/h100-16k.json"));
  const auto m = load_model(path("workloads/models/llama3.1-405b.json"));
  const auto s = setup("tp=8,pp=16,dp=128", 8192, 2048, false);
  for (auto _ : state) benchmark::DoNotOptimize(simulate_training(topo, m, s).step_time_s);
}
BENCHMARK(BM_Llama405B_16k_Folded)->Unit(benchmark::kSecond)->Iterations(1);

// The same step with the host's launches modelled (a profile measuring 10 µs a launch): a launch
// op before every op doubles the graph (issue 15: what the host-issue model costs).
void BM_Llama405B_16k_Folded_HostLaunches(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/h100-16k.json"));
  const auto m = load_model(path("workloads/models/llama3.1-405b.json"));
  auto s = setup("tp=8,pp=16,dp=128", 8192, 2048, false);
  CalibrationProfile p;
  p.gpu = topo.gpu.model;
  p.source = "bench";
  p.host_per_kernel_s = 10e-6;
  s.profile = p;
  for (auto _ : state) benchmark::DoNotOptimize(simulate_training(topo, m, s).step_time_s);
}
BENCHMARK(BM_Llama405B_16k_Folded_HostLaunches)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Llama70B_512_Full(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/dgx-h100-superpod.json"));
  const auto m = load_model(path("workloads/models/llama3.1-70b.json"));
  const auto s = setup("tp=8,pp=4,cp=4,dp=4", 32768, 32, true);
  for (auto _ : state) benchmark::DoNotOptimize(simulate_training(topo, m, s).step_time_s);
}
BENCHMARK(BM_Llama70B_512_Full)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Llama70B_512_MainWinner_Full(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/dgx-h100-superpod.json"));
  const auto m = load_model(path("workloads/models/llama3.1-70b.json"));
  auto s = setup("tp=4,dp=128", 8192, 128, true);
  s.config.zero = 3;
  for (auto _ : state) benchmark::DoNotOptimize(simulate_training(topo, m, s).step_time_s);
}
BENCHMARK(BM_Llama70B_512_MainWinner_Full)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Llama70B_512_Folded(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/dgx-h100-superpod.json"));
  const auto m = load_model(path("workloads/models/llama3.1-70b.json"));
  const auto s = setup("tp=8,pp=4,cp=4,dp=4", 32768, 32, false);
  for (auto _ : state) benchmark::DoNotOptimize(simulate_training(topo, m, s).step_time_s);
}
BENCHMARK(BM_Llama70B_512_Folded)->Unit(benchmark::kMillisecond);

}  // namespace

// Discards what is written (the trace's cost without the disk's).
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

void BM_Llama70B_64_Full(benchmark::State& state) {
  auto topo = load_topology(path("topologies/dgx-h100-superpod.json"), {8});
  const auto m = load_model(path("workloads/models/llama3.1-70b.json"));
  const auto s = setup("tp=8,pp=4,dp=2", 4096, 16, true);
  const bool trace = state.range(0) != 0;
  for (auto _ : state) {
    const auto r = simulate_training(topo, m, s);
    if (trace) {
      NullBuffer buffer;
      std::ostream out(&buffer);
      write_chrome_trace(r.trace, r.replay, out);
    }
    benchmark::DoNotOptimize(r.step_time_s);
  }
}
BENCHMARK(BM_Llama70B_64_Full)->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->Iterations(1);

// The trace writer alone on the same step (simulated once): its time against
// BM_Llama70B_64_Full/0 is what --trace adds, without the machine's noise on two full runs.
void BM_Llama70B_64_TraceOnly(benchmark::State& state) {
  auto topo = load_topology(path("topologies/dgx-h100-superpod.json"), {8});
  const auto m = load_model(path("workloads/models/llama3.1-70b.json"));
  const auto r = simulate_training(topo, m, setup("tp=8,pp=4,dp=2", 4096, 16, true));
  for (auto _ : state) {
    NullBuffer buffer;
    std::ostream out(&buffer);
    write_chrome_trace(r.trace, r.replay, out);
  }
  state.counters["ops"] = static_cast<double>(r.trace.graph.op_count());
}
BENCHMARK(BM_Llama70B_64_TraceOnly)->Unit(benchmark::kMillisecond);
