#pragma once
// Serving layout search: for a GPU budget and a traffic profile, every (TP, PP) layout with as
// many replicas as the budget holds, simulated under the same requests, ranked by whether it
// meets the SLOs (p99 TTFT and p99 TPOT, as MLPerf's server scenario judges) and then by mean
// end-to-end latency; and the seed's question answered: do more replicas beat a more sharded
// replica for this model and this traffic?
#include <cstdint>
#include <string>
#include <vector>

#include "serving/serving_sim.hpp"

namespace meshsim {

struct ServingCandidate {
  ReplicaShape shape;
  std::int64_t replicas = 0;
  std::string refused;  // non-empty: why it was not simulated (does not fit, heads, ...)
  bool meets_slo = false;
  ServingResult result;
};

struct ServingSearchResult {
  std::vector<ServingCandidate> candidates;  // ranked: simulated and meeting the SLO first
  std::string verdict;                       // replicas versus sharding, in one sentence
};

// `base` carries everything but the layout and replica count (scheduler, dtypes, SLOs, router).
// Layouts: TP a power of two dividing the attention heads and at most a node, PP a power of two
// up to the layers, tp·pp ≤ gpus, replicas = ⌊gpus / (tp·pp)⌋.
ServingSearchResult search_serving(const Topology& topo, const ModelSpec& model,
                                   const ServingSetup& base, const std::vector<Request>& requests,
                                   std::int64_t gpus, std::size_t threads = 0);

}  // namespace meshsim
