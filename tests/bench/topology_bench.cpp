// Loading and routing large clusters: the 16,384-GPU three-tier file and the H100 superpod
// rebuilt with --nodes 2048. Reports load time, resident memory growth, and route times.
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include "topology/bisection.hpp"
#include "topology/router.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;

namespace {
std::string path(const char* name) {
  return std::string(MESHSIM_SOURCE_DIR) + "/topologies/" + name;
}

double rss_MiB() {
  std::ifstream in("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  in >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * 4096.0 / (1 << 20);
}
}  // namespace

static void BM_Load16k(benchmark::State& state) {
  // Resident memory of one loaded cluster, measured while it is alive (the allocator reuses the
  // pages in later iterations, so only the first one is meaningful).
  static double held_MiB = -1;
  for (auto _ : state) {
    const double before = rss_MiB();
    auto t = load_topology(path("h100-16k.json"));
    if (held_MiB < 0) held_MiB = rss_MiB() - before;
    benchmark::DoNotOptimize(t.gpu_count());
  }
  state.counters["first_load_rss_MiB"] = held_MiB;
}
BENCHMARK(BM_Load16k)->Unit(benchmark::kMillisecond);

static void BM_LoadSuperpod2048(benchmark::State& state) {
  for (auto _ : state) {
    auto t = load_topology(path("dgx-h100-superpod.json"), TopologyOptions{2048});
    benchmark::DoNotOptimize(t.gpu_count());
  }
}
BENCHMARK(BM_LoadSuperpod2048)->Unit(benchmark::kMillisecond);

static void BM_RouteColdAcrossPods16k(benchmark::State& state) {
  const auto t = load_topology(path("h100-16k.json"));
  std::int32_t dst = 8 * 256;
  for (auto _ : state) {
    Router r(t);  // cold cache every iteration
    benchmark::DoNotOptimize(r.gpu_route(0, dst).hops());
    dst = dst + 8 < 16384 ? dst + 8 : 8 * 256;
  }
}
BENCHMARK(BM_RouteColdAcrossPods16k)->Unit(benchmark::kMicrosecond);

static void BM_RouteCached16k(benchmark::State& state) {
  const auto t = load_topology(path("h100-16k.json"));
  Router r(t);
  r.gpu_route(0, 16383);
  for (auto _ : state) benchmark::DoNotOptimize(r.gpu_route(0, 16383).hops());
}
BENCHMARK(BM_RouteCached16k);

static void BM_Bisection16k(benchmark::State& state) {
  const auto t = load_topology(path("h100-16k.json"));
  for (auto _ : state) benchmark::DoNotOptimize(bisection_Bps(t));
}
BENCHMARK(BM_Bisection16k)->Unit(benchmark::kMillisecond);
