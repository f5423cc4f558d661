#pragma once
// One self-contained HTML file with inline SVG (no scripts, no network). For `train`: a headline
// table (step, tokens/s, MFU, exposed communication per group, bubble, memory verdict), where the
// step goes, memory per category against the GPU's capacity and the step's timeline. For
// `search` also: the winner and why it wins, its launch line, the ranked layouts with equivalent
// shapes grouped, the non-compute part of each step, every simulated layout's step time against
// its memory with the Pareto front, the best layout per TP degree, what the enumeration rejected
// and why, the seed heuristic's rank, and the stack's and kernel model's assumptions.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/replay.hpp"
#include "memory/memory_model.hpp"
#include "report/report_candidate.hpp"
#include "strategy/trace.hpp"
#include "topology/topology_summary.hpp"

namespace meshsim {

struct SearchSummary {
  std::int64_t combinations = 0;
  std::map<std::string, std::int64_t> rejected;  // reason → count
  std::int64_t moved_layers = 0;                 // Enumeration::moved_layers
  std::size_t top = 10;                          // groups shown in the ranked views
  std::string heuristic_label, heuristic_rule;
  std::size_t heuristic_rank = 0;          // 0: not among the simulated layouts
  bool heuristic_rank_exact = true;        // false: outside the top layouts, rank not exact
  std::optional<double> heuristic_step_s;  // simulated apart when rank is 0
  // TP degrees whose best was not searched exhaustively: what it is at least (the search's
  // tp_best_at_least).
  std::map<std::int64_t, double> tp_best_at_least;
  std::string launch_format, launch;  // --emit
  std::string stack, stack_description, kernel_model, job;
};

struct HtmlReport {
  std::string title;
  std::string command;
  std::string cluster;  // cluster name
  std::string gpu;
  double gpu_bytes = 0;
  TopologySummary topology;
  // Best first: the one layout of `train`, or every layout `search` simulated.
  std::vector<ReportCandidate> ranked;
  std::optional<SearchSummary> search;
  const Trace* trace = nullptr;  // the first candidate's step, for the timeline
  const ReplayResult* replay = nullptr;
  std::vector<std::string> notes;
};

std::string render_html(const HtmlReport& report);

}  // namespace meshsim
