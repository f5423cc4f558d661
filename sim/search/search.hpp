#pragma once
// `meshsim search`: enumerate, prune, simulate every remaining candidate (a thread pool, each
// worker with its own simulator state), rank by step time (ties: less exposed communication).
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "search/candidates.hpp"
#include "topology/topology.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

struct EvaluatedCandidate {
  Candidate candidate;
  TrainingResult result;  // without its trace (dropped to keep a search's memory small)
  std::string error;      // non-empty when the simulation refused the candidate
};

struct SearchOptions {
  std::int32_t threads = 0;  // 0: every hardware thread
  // Called from the workers after each evaluation (serialised): done, total.
  std::function<void(std::size_t, std::size_t)> progress;
  StrategyOptions strategy;
  MemoryOptions memory;
  // Stacks to compare (--stack a,b): every layout is tried on each, with the stack's own memory
  // recipe and recompute policies. Empty: strategy.stack only.
  std::vector<Stack> stacks;
  // Kernel and collective calibration for every candidate (train's --calibration).
  std::optional<CalibrationProfile> profile;
  // Long work stops early: past `deadline`, or once `*interrupted` is set (a signal handler's
  // flag), the remaining candidates are not simulated; each carries kNotSimulated... as its
  // error, so it ranks after every simulated one. Set neither: every candidate runs.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* interrupted = nullptr;
};

inline constexpr const char* kNotSimulatedBudget = "not simulated: the time budget ran out";
inline constexpr const char* kNotSimulatedInterrupted = "not simulated: the search was interrupted";
// Whether an evaluation was skipped by a budget or an interruption (rather than failing).
bool not_simulated(const EvaluatedCandidate& e);

// Simulates `candidates` (in any order; the result keeps the input order).
std::vector<EvaluatedCandidate> evaluate_candidates(const Topology& topo, const ModelSpec& model,
                                                    const SearchJob& job,
                                                    const std::vector<Candidate>& candidates,
                                                    const SearchOptions& options);

// Best first: step time, then total exposed communication, then the label (deterministic).
void rank_results(std::vector<EvaluatedCandidate>& results);

double total_exposed_s(const TrainingResult& r);

struct SearchResult {
  Enumeration enumeration;
  std::vector<EvaluatedCandidate> results;  // ranked; failed evaluations last
};

// The stack's policy for the recompute mode `c` runs (its selective ops).
void apply_stack_policy(Candidate& c, const Stack& stack);

// The candidates of a search: every valid layout (on each of options.stacks when given), with
// each stack's policy for the recompute mode a candidate runs.
Enumeration enumerate_search(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                             const SearchSpace& space, const SearchOptions& options);

SearchResult run_search(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                        const SearchSpace& space, const SearchOptions& options);

// The seed guide's starting point for this cluster size (one node: DDP, or FSDP/ZeRO-3 when DDP
// does not fit; 2–16 nodes: TP inside the node, ZeRO/FSDP across nodes, PP only when it does not
// fit; more: TP inside the node × PP × CP for long sequences × DP). `why` says which rule.
Candidate seed_heuristic(const ModelSpec& model, const SearchJob& job, std::int64_t gpus,
                         std::int64_t gpus_per_node, const GpuSpec& gpu,
                         const MemoryOptions& memory, std::string* why);

}  // namespace meshsim
