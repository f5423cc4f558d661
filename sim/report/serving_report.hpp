#pragma once
// Serving results as the text summary `serve` prints, as a Chrome/Perfetto trace (a process per
// replica, a thread per pipeline stage, one event per iteration, KV utilisation as a counter) and
// as a self-contained HTML report with latency CDFs and KV utilisation over time.
#include <ostream>
#include <string>
#include <vector>

#include "search/serving_search.hpp"
#include "serving/serving_sim.hpp"

namespace meshsim {

// The text summary `meshsim serve` prints: latency percentiles (TTFT, TPOT, ITL, E2E,
// scheduling delay), throughput, goodput, requests, swap, KV cache, prefix cache, speculative
// decoding and KV transfer when they apply, then the run's notes.
std::string serving_summary_text(const ServingResult& result);

void write_serving_trace(const ServingResult& result, std::ostream& out);

struct ServingReport {
  std::string title, command, cluster, gpu, layout, traffic;
  const ServingResult* result = nullptr;
  const ServingSearchResult* search = nullptr;  // optional: the compared layouts
  double slo_ttft_s = 0, slo_tpot_s = 0;
};
std::string render_serving_html(const ServingReport& report);

}  // namespace meshsim
