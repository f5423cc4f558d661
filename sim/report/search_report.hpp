#pragma once
// A training search as `meshsim search` reports it: the ranked table with why the winner wins,
// the best layout per TP degree and how the seed heuristic compares (text); the same as one JSON
// document (DESIGN.md's `search` keys); every simulated layout as CSV.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "search/search.hpp"
#include "topology/path_class.hpp"

namespace meshsim {

// The run a search report describes, beside its ranked results.
struct SearchRun {
  std::string model, cluster, gpu;  // model name, cluster file stem, GPU model
  std::int64_t gpus = 0;
  SearchJob job;
  std::string kernel_model;                  // ComputeModel::describe()
  std::string stack;                         // the stack searched (the first when compared)
  std::vector<std::string> stacks_compared;  // empty: one stack
  // What the selective candidates recompute (search --recompute-modules); empty: each stack's
  // selective policy.
  std::vector<std::string> recompute_modules;
  std::vector<std::string> notes;        // "# note: " lines in the header, "notes" in JSON
  const SearchResult* result = nullptr;  // ranked
  std::size_t skipped = 0;               // layouts not simulated (time budget, interrupt)
  std::string stopped;                   // why, when skipped > 0
  std::size_t top = 10;                  // rows of the text table
  std::size_t top_k = 0;                 // the bounded search's K (0: exhaustive)
  bool host_column = false;              // the profile models the host's launches
  // The seed heuristic's layout and rule, its rank among the results (0: not among them) and
  // whether that rank is exact; its own simulation when it was not searched.
  std::string heuristic_label, heuristic_rule;
  std::size_t heuristic_rank = 0;
  bool heuristic_rank_exact = true;
  const EvaluatedCandidate* heuristic_eval = nullptr;
  // GPUs of a node talk over PCIe (this path class): the text says why TP stays small.
  std::optional<PathClass> pcie;
  std::string launch_format, launch;  // --emit's launch configuration of the winner
};

// "N kept layouts fit memory only with layers moved ..." (Enumeration::moved_layers), for the
// text header and the HTML report.
std::string moved_layers_text(std::int64_t layouts);

std::string search_text(const SearchRun& run);
Json search_json(const SearchRun& run);
// One row per simulated layout, in rank order, with its error (if any) last.
void write_search_csv(const std::vector<EvaluatedCandidate>& results, std::ostream& out);

}  // namespace meshsim
