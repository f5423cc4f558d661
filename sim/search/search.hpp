#pragma once
// `meshsim search`: enumerate, prune, simulate every remaining candidate (a thread pool, each
// worker with its own simulator state), rank by step time (ties: less exposed communication).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
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

// Routing and pricing contexts kept across the rounds of a bounded search (a worker leases one
// for the length of an evaluate_candidates call): prices cached in one round serve the next.
class ContextPool {
 public:
  explicit ContextPool(const Topology& topo)
      : topo_(topo), prices_(std::make_shared<SharedPrices>()) {}
  std::unique_ptr<CommContext> take();  // its folded prices shared with the pool's other contexts
  void give(std::unique_ptr<CommContext> c);

 private:
  const Topology& topo_;
  std::shared_ptr<SharedPrices> prices_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<CommContext>> free_;
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
  // Stacks (by name) that differ from another of `stacks` only in CP's K/V exchange (`search
  // --cp-comm ring,allgather`): only their layouts with CP are tried, the rest run the same step.
  std::set<std::string, std::less<>> cp_only;
  // Kernel and collective calibration for every candidate (train's --calibration).
  std::optional<CalibrationProfile> profile;
  // Long work stops early: past `deadline`, or once `*interrupted` is set (a signal handler's
  // flag), the remaining candidates are not simulated; each carries kNotSimulated... as its
  // error, so it ranks after every simulated one. Set neither: every candidate runs.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* interrupted = nullptr;
  // Exact top-K (search_top_k): only candidates whose step-time lower bound does not exceed the
  // K-th best simulated step so far are simulated. 0: every candidate.
  std::size_t top_k = 0;
  std::shared_ptr<ContextPool> contexts;  // null: a fresh context per worker and call
};

// The training setup a search simulates a candidate with (its stack, recompute policy, memory
// recipe and the options' calibration).
TrainingSetup setup_of(const Candidate& c, const SearchJob& job, const SearchOptions& options);

// step_time_lower_bound (strategy/trace_builder.hpp) of a candidate as the search would run it:
// the layer passes as chains with their collectives priced in `context` (null: a fresh one), to
// `level`, or compute alone where the mesh does not match the cluster.
double candidate_lower_bound_s(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                               const Candidate& c, const SearchOptions& options,
                               CommContext* context = nullptr, BoundLevel level = BoundLevel::full);

// Exact top-K by bounds (issue 17): candidates are simulated best bound first (the `anchor`
// label, the seed heuristic's layout, before all), in rounds of max(2K, 32); a candidate is left
// out once its bound exceeds the K-th best step simulated so far, the best of its TP degree and
// the anchor's step (these two while within kAnchorReach of the K-th best), since then it can be
// none of those (a bound never exceeds the simulated step): the top K, the best per TP degree
// (except tp_best_at_least's) and (anchor_rank_exact) the anchor's rank are those of simulating
// every candidate. Bounds are ordered at BoundLevel::chains (without the data-parallel streams'
// part and the middle pipeline stages' chains, which price the widest and the most groups); a
// round's candidates are raised to BoundLevel::unloaded, then to full, and the round is chosen
// again after each raise, so a candidate is simulated only with its full bound below its limit.
// Rounds do not depend on the thread count, so
// neither does the output. `evaluate` simulates one round's candidates (in a process or across MPI
// ranks) with the options it is given (their progress counts across rounds: done of done + still
// needed); `agree` makes every MPI rank use rank 0's values (identity in one process). Returns the
// simulated candidates in input order and how many were bounded out.
struct BoundedEvaluation {
  std::vector<EvaluatedCandidate> results;
  std::size_t bounded_out = 0;
  // Whether every layout faster than the anchor was simulated (its rank among the simulated is
  // its rank among all): the anchor's step bounds what is simulated only while it is within
  // kAnchorReach of the K-th best.
  bool anchor_rank_exact = true;
  // TP degrees whose best was not searched exhaustively (it is beyond kAnchorReach of the K-th
  // best, or none of their layouts was simulated), each with what its best is at least: the
  // least bound of its layouts left out (the best simulated, if lower, is the best).
  std::map<std::int64_t, double> tp_best_at_least;
  // Candidates whose bound was raised to BoundLevel::unloaded, and of those to full
  // (evaluate_top_k raises only those that reach a round, and none once the search is cut).
  std::size_t unloaded = 0, sharpened = 0;
};
// Ranking a far-off anchor exactly would simulate nearly everything (the seed heuristic is 66 %
// behind the winner for Llama 3.1 405B on 16,384 GPUs), and so would finding the best of a far-off
// TP degree (there TP 1 and 2 took 73 of 192 simulations, 14 with this rule): their steps join the
// limit only within this factor of the K-th best. A reporting choice, not a model constant.
inline constexpr double kAnchorReach = 1.10;
BoundedEvaluation evaluate_top_k(
    const Topology& topo, const ModelSpec& model, const SearchJob& job,
    const std::vector<Candidate>& candidates, const SearchOptions& options,
    const std::function<std::vector<EvaluatedCandidate>(const std::vector<Candidate>&,
                                                        const SearchOptions&)>& evaluate,
    const std::function<double(double)>& agree, const std::string& anchor);

inline constexpr const char* kSameWithoutCp =
    "without CP on the other CP exchange's stack (the same step)";
inline constexpr const char* kBoundedOut = "bounded out (step-time bound above the K-th best)";

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
  std::vector<EvaluatedCandidate> results;          // ranked; failed evaluations last
  std::map<std::int64_t, double> tp_best_at_least;  // BoundedEvaluation's
};

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
