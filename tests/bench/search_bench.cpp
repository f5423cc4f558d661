// Search performance (issue 6 target): every valid candidate for Llama 3.1 70B on 512 H100
// evaluated in <= 60 s on the 2-core CI machine. Reports the candidate count and the rate.
#include <benchmark/benchmark.h>

#include "model/model_loader.hpp"
#include "search/search.hpp"
#include "topology/topology_loader.hpp"

namespace {

using namespace meshsim;

std::string path(const std::string& rel) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + rel;
}

void BM_Search70B_512(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/dgx-h100-superpod.json"));
  const auto m = load_model(path("workloads/models/llama3.1-70b.json"));
  const SearchJob job{state.range(0), 32, DType::bf16, true};
  SearchOptions opt;
  std::size_t evaluated = 0;
  for (auto _ : state) evaluated = run_search(topo, m, job, {}, opt).results.size();
  state.counters["candidates"] = static_cast<double>(evaluated);
  state.counters["per_s"] =
      benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Search70B_512)->Arg(32768)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
