#pragma once
// One self-contained HTML file with inline SVG (no scripts, no network): ranked stacked bars of
// where each candidate's step goes, memory per category against the GPU's capacity, the chosen
// layout's step timeline for a few ranks, the cluster summary and the exact command.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/replay.hpp"
#include "memory/memory_model.hpp"
#include "strategy/trace.hpp"
#include "topology/topology_summary.hpp"

namespace meshsim {

struct ReportCandidate {
  std::string label;
  double step_s = 0, compute_s = 0, bubble_s = 0, mfu = 0;
  std::map<std::string, double> exposed_s;  // by group
  MemoryBreakdown memory;
};

struct HtmlReport {
  std::string title;
  std::string command;
  std::string cluster;  // cluster name
  std::string gpu;
  double gpu_bytes = 0;
  TopologySummary topology;
  std::vector<ReportCandidate> ranked;  // best first
  const Trace* trace = nullptr;         // the first candidate's step, for the timeline
  const ReplayResult* replay = nullptr;
  std::vector<std::string> notes;
};

std::string render_html(const HtmlReport& report);

}  // namespace meshsim
