// Scale limits (issue 9): a 100,000-GPU parametric cluster (h100-16k.json rebuilt with 12,500
// DGX H100 nodes) loads, and one folded training step of Llama 3.1 405B (TP 8, PP 10, DP 1250,
// ZeRO-1, 8K sequences) simulates within the machine's memory. The peak resident set is
// reported as a counter (getrusage; it includes everything the process touched before).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "model/model_loader.hpp"
#include "topology/topology_loader.hpp"
#include "training/training_sim.hpp"

namespace {

using namespace meshsim;

std::string path(const std::string& rel) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + rel;
}

double peak_rss_gb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024 / 1e9;  // ru_maxrss is in KiB on Linux
}

void BM_Load_100k_Gpus(benchmark::State& state) {
  for (auto _ : state) {
    const auto topo = load_topology(path("topologies/h100-16k.json"), {.nodes = 12500});
    benchmark::DoNotOptimize(topo.gpu_count());
  }
  state.counters["peak_rss_GB"] = peak_rss_gb();
}
BENCHMARK(BM_Load_100k_Gpus)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Step_405B_100k_Gpus(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/h100-16k.json"), {.nodes = 12500});
  const auto m = load_model(path("workloads/models/llama3.1-405b.json"));
  TrainingSetup s;
  s.job = {8192, 2500, 1, DType::bf16, true};
  s.config.mesh = parse_mesh("tp=8,pp=10,dp=1250", "bench");
  s.config.sp = true;
  s.config.zero = 1;
  for (auto _ : state) benchmark::DoNotOptimize(simulate_training(topo, m, s).step_time_s);
  state.counters["peak_rss_GB"] = peak_rss_gb();
}
BENCHMARK(BM_Step_405B_100k_Gpus)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
