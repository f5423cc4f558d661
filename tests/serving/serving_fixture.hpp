#pragma once
// Shared fixtures for the serving tests: bundled clusters and models, a step-cost model of a
// replica on them.
#include <memory>

#include "model/model_loader.hpp"
#include "serving/scheduler.hpp"
#include "serving/step_cost.hpp"
#include "serving/traffic.hpp"
#include "strategy/comm_model.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim::test {

struct ReplicaFixture {
  ReplicaFixture(const std::string& topology, const std::string& model_file, ReplicaShape shape)
      : topo(load_topology(topology_path(topology))),
        model(load_model(source_path("workloads/models/" + model_file))),
        compute(topo.gpu),
        comm(topo) {
    std::vector<std::int32_t> gpus;
    for (std::int32_t g = 0; g < shape.tp * shape.pp; ++g) gpus.push_back(g);
    cost = std::make_unique<StepCost>(topo, model, shape, gpus, compute, comm);
  }
  Topology topo;
  ModelSpec model;
  ComputeModel compute;
  CommContext comm;
  std::unique_ptr<StepCost> cost;
};

// Requests as `serve` generates them: `rate` as --rate takes it, lengths as --prompt/--output.
inline std::vector<Request> make_requests(const std::string& rate, std::int64_t n,
                                          const std::string& prompt, const std::string& output,
                                          std::uint64_t seed = 1, PrefixShare prefix = {}) {
  TrafficSpec s;
  s.arrival = arrival_from_rate(rate, 1, "--rate");
  s.prompt = parse_length_dist(prompt, "", "--prompt");
  s.output = parse_length_dist(output, "", "--output");
  s.requests = n;
  s.seed = seed;
  s.prefix = prefix;
  return generate_requests(s);
}

// Completes a formed batch by hand, as the serving simulation does (one token per decode, no
// speculation): computes its tokens, samples, finishes what is done. Returns how many finished.
inline std::int64_t complete_by_hand(ReplicaScheduler& s, std::vector<RequestState>& reqs,
                                     const Batch& b) {
  std::int64_t finished = 0;
  for (const auto& e : b.entries) {
    auto& r = reqs[static_cast<std::size_t>(e.request)];
    const auto before = r.computed;
    r.computed += e.tokens;
    r.in_flight = false;
    s.computed(reqs, e.request, before);
    if (r.computed == r.known()) ++r.generated;
    if (r.generated == r.output) {
      s.finish(reqs, e.request);
      ++finished;
    }
  }
  return finished;
}

// One iteration by hand: forms the batch and completes it.
inline Batch step_by_hand(ReplicaScheduler& s, std::vector<RequestState>& reqs) {
  Batch b = s.form_batch(reqs);
  complete_by_hand(s, reqs, b);
  return b;
}

inline BatchShape one_decode(std::int64_t context) {
  BatchShape b;
  b.decodes = 1;
  b.decode_context = context;
  b.sampled = 1;
  return b;
}

inline BatchShape one_prefill(std::int64_t tokens) {
  BatchShape b;
  b.prefill.push_back(PrefillChunk{.tokens = tokens, .context = 0});
  b.sampled = 1;
  return b;
}

}  // namespace meshsim::test
