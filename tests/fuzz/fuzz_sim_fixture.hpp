#pragma once
// What the fuzzers run past the loaders (issue 19: "fuzzers never simulate"): a short training
// step and a short serving run on inputs the loaders accepted, which must end in finite,
// non-negative numbers or an Error. The fixed side is a small GPT (2 layers, hidden 256) and,
// for serving, one 8-GPU node written inline (the fuzzers read no files).
#include <cmath>

#include "model/model_loader.hpp"
#include "serving/serving_sim.hpp"
#include "stack/stack.hpp"
#include "topology/topology_loader.hpp"
#include "training/training_sim.hpp"

namespace meshsim::fuzz {

inline const ModelSpec& tiny_model() {
  static const ModelSpec m = read_model(
      JsonRef::root(Json::parse(R"({"hidden": 256, "layers": 2, "heads": 4, "vocab": 1000,
                      "max_positions": 4096})"),
                    "tiny.json"));
  return m;
}

inline const Topology& small_node() {
  static const Topology t = load_topology_json(Json::parse(R"({
    "name": "node",
    "node": {
      "gpu": "H100-SXM5-80GB",
      "vertices": [{"name": "gpu", "kind": "gpu", "count": 8}, {"name": "sw", "kind": "nvswitch"}],
      "links": [{"a": "gpu", "b": "sw", "kind": "nvlink", "bandwidth_GBps": 450, "latency_ns": 100}]
    },
    "fabric": {"kind": "none"}
  })"),
                                               "node.json");
  return t;
}

inline void check_finite(double v) {
  if (!std::isfinite(v) || v < 0) __builtin_trap();
}

// One data-parallel training step of the tiny model on every GPU of `topo`.
inline void train_step(const Topology& topo) {
  TrainingSetup s;
  s.strategy.stack = *bundled_stack("megatron");
  s.memory.recipe = stack_recipe(s.strategy.stack, DType::bf16);
  const auto gpus = static_cast<std::int64_t>(topo.gpus().size());
  s.job = {128, gpus, 1, DType::bf16, true};
  s.config.mesh.dp = gpus;
  const auto r = simulate_training(topo, tiny_model(), s);
  check_finite(r.step_time_s);
  if (!(r.step_time_s > 0)) __builtin_trap();
  check_finite(r.mfu);
}

// The requests served by one tp=1 replica of the tiny model on the small node.
inline void serve(const std::vector<Request>& requests) {
  // Every output token is an iteration: a fuzzed million-token request is long work, not a bug.
  std::int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.prompt_tokens + r.output_tokens;
  if (requests.empty() || tokens > 200'000) return;
  ServingSetup s;
  s.check_invariants = true;
  s.scheduler.prefix_caching = true;  // traces and specs may name prefix groups
  const auto r = simulate_serving(small_node(), tiny_model(), s, requests);
  for (const auto* l : {&r.ttft, &r.tpot, &r.e2e}) {
    check_finite(l->mean);
    check_finite(l->p99);
  }
  check_finite(r.requests_per_s);
}

}  // namespace meshsim::fuzz
