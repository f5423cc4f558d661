// Serving simulation performance (issue 7 target 10 s; issue 16: <= 5 s with each engine feature
// on): Llama 3.1 70B, 8 replicas of TP 8 on 8 DGX H100 nodes, Poisson 32 req/s, chat-shaped lengths
// (lognormal prompts of mean 1024, outputs of mean 256).
#include <benchmark/benchmark.h>

#include "model/model_loader.hpp"
#include "serving/engine.hpp"
#include "serving/serving_sim.hpp"
#include "topology/topology_loader.hpp"

namespace {

using namespace meshsim;

std::string path(const std::string& rel) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + rel;
}

// state.range(0) > 0: a closed loop of that many clients instead of Poisson arrivals.
// state.range(1): 0 the default scheduler, 1 the vllm engine profile (CUDA-graph padding), 2 the
// trtllm profile (reserve-at-admission, free-memory KV budget, FP8 KV with FP8 weights), 3 the
// sglang profile (new-token-ratio admission, unmixed prefill and decode batches, one-token
// pages, prefix caching on), 4 trtllm with MAX_UTILIZATION admission.
// state.range(2), features on top: bit 0 prefix caching with 64 prefix groups of 512 tokens,
// bit 1 speculative decoding with an MTP head (3 drafts, acceptance 0.7).
void BM_Serve_100k_Requests_8_Replicas(benchmark::State& state) {
  TopologyOptions opt;
  opt.nodes = 8;
  const auto topo = load_topology(path("topologies/dgx-h100-superpod.json"), opt);
  const auto model = load_model(path("workloads/models/llama3.1-70b.json"));
  TrafficSpec spec;
  spec.arrival = arrival_from_rate("32", 1, "bench");
  spec.prompt = parse_length_dist("lognormal:1024,0.8", "", "bench");
  spec.output = parse_length_dist("lognormal:256,0.7", "", "bench");
  spec.requests = 100000;
  const auto features = state.range(2);
  if (features & 1) spec.prefix = PrefixShare{.groups = 64, .tokens = 512};
  const auto reqs = generate_requests(spec);
  ServingSetup s;
  s.shape.tp = 8;
  s.replicas = 8;
  s.clients = state.range(0);
  s.think_time_s = s.clients > 0 ? 1.0 : 0.0;
  s.think_exponential = true;
  if (state.range(1) > 0) {
    const auto profile = state.range(1);
    const auto* e = bundled_engine(profile == 1 ? "vllm" : profile == 3 ? "sglang" : "trtllm");
    s.scheduler = e->scheduler;
    if (profile == 4) s.scheduler.admission = Admission::max_utilization;
    if (profile == 2 || profile == 4) {
      s.shape.weight_dtype = DType::fp8;
      s.shape.kv_dtype = default_kv_dtype(*e, DType::fp8);
    }
  }
  if (features & 1) s.scheduler.prefix_caching = true;
  if (features & 2) {
    s.speculative.proposer = Proposer::mtp;
    s.speculative.tokens = 3;
    s.speculative.acceptance = 0.7;
  }
  for (auto _ : state) {
    const auto r = simulate_serving(topo, model, s, reqs);
    state.counters["iterations"] = static_cast<double>(r.iterations);
    benchmark::DoNotOptimize(r.ttft.p99);
  }
}
BENCHMARK(BM_Serve_100k_Requests_8_Replicas)
    ->Args({0, 0, 0})
    ->Args({512, 0, 0})
    ->Args({0, 1, 0})
    ->Args({0, 2, 0})
    ->Args({512, 2, 0})
    ->Args({0, 3, 0})
    ->Args({0, 3, 1})
    ->Args({0, 4, 0})
    ->Args({0, 1, 1})
    ->Args({0, 1, 2})
    ->Args({0, 1, 3})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

// One iteration's cost on a replica: a mixed batch of 255 decodes and a 2048-token chunk.
void BM_StepCost_MixedBatch(benchmark::State& state) {
  const auto topo = load_topology(path("topologies/dgx-h100.json"));
  const auto model = load_model(path("workloads/models/llama3.1-70b.json"));
  const ComputeModel cm(topo.gpu);
  CommContext comm(topo);
  StepCost cost(topo, model, ReplicaShape{.tp = 8}, {0, 1, 2, 3, 4, 5, 6, 7}, cm, comm);
  BatchShape b;
  b.decodes = 255;
  b.decode_context = 255 * 1500;
  b.prefill.push_back(PrefillChunk{.tokens = 2048, .context = 0});
  b.sampled = 255;
  for (auto _ : state) benchmark::DoNotOptimize(cost.stage_seconds(0, b));
}
BENCHMARK(BM_StepCost_MixedBatch);

}  // namespace
