#pragma once
// Serving results as the text summary `serve` prints, as a Chrome/Perfetto trace (a process per
// replica, a thread per pipeline stage, one event per iteration, KV utilisation as a counter) and
// as a self-contained HTML report with latency CDFs and KV utilisation over time.
#include <ostream>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "search/serving_search.hpp"
#include "serving/serving_sim.hpp"

namespace meshsim {

// The text summary `meshsim serve` prints: latency percentiles (TTFT, TPOT, ITL, E2E,
// scheduling delay), throughput, goodput, requests, swap, KV cache, prefix cache, speculative
// decoding and KV transfer when they apply, then the run's notes.
std::string serving_summary_text(const ServingResult& result);
// serving_json(result) with the engine that ran it: its name and the scheduler settings it ended
// with after the flags (admission, preemption, batch limits, KV budget and fraction at `tp`).
Json serving_run_json(const ServingResult& result, const std::string& engine,
                      const SchedulerOptions& scheduler, std::int64_t tp);

// `serve --search`: every (replicas, TP, PP) layout for a GPU budget, ranked, with the verdict.
struct ServingSearchRun {
  std::string model, cluster, traffic;  // the model's name, the cluster's, the traffic in words
  std::int64_t gpus = 0;
  double slo_ttft_s = 0, slo_tpot_s = 0;
};
std::string serving_search_text(const ServingSearchResult& found, const ServingSearchRun& run);
// {"candidates": [{"tp", "pp", "replicas", "refused" | "meets_slo", "metrics"}], "verdict"}
Json serving_search_json(const ServingSearchResult& found);

void write_serving_trace(const ServingResult& result, std::ostream& out);

struct ServingReport {
  std::string title, command, cluster, gpu, layout, traffic;
  const ServingResult* result = nullptr;
  const ServingSearchResult* search = nullptr;  // optional: the compared layouts
  double slo_ttft_s = 0, slo_tpot_s = 0;
};
std::string render_serving_html(const ServingReport& report);

}  // namespace meshsim
