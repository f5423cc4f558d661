#pragma once
// One simulated training layout as the reports show it, and what the search report derives from
// the ranked list: groups of equivalent layouts, why the winner wins, the Pareto front of step
// time against memory.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "memory/memory_model.hpp"
#include "search/search.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

struct ReportCandidate {
  std::string label;
  // The layout without its data-parallel sharding (ZeRO stage, HSDP group): what the per-rank
  // compute and the model-parallel communication depend on. Empty: the label.
  std::string shape;
  std::int64_t tp = 1;
  double step_s = 0, compute_s = 0, bubble_s = 0, mfu = 0;
  double host_wait_s = 0;  // GPU idle until the host launched its next op
  // Of compute_s, kernels slowed by collectives beside them; collective time lost to HBM sharing
  // and waiting for a kernel's SMs (late start).
  double interference_s = 0, comm_interference_s = 0;
  double tokens_per_s = 0, tokens_per_s_per_gpu = 0;
  std::map<std::string, double> exposed_s;  // by group
  MemoryBreakdown memory;
};

// One row of a report's charts from a simulated step.
ReportCandidate report_candidate(const std::string& label, std::int64_t tp,
                                 const TrainingResult& r);
// The ranked layouts as the reports show them (those without an error: they come first), each
// with its shape (the layout without its ZeRO stage and HSDP group).
std::vector<ReportCandidate> report_candidates(const std::vector<EvaluatedCandidate>& results);

// Equivalent layouts, one group each, in the rank order of their best member (`members` are
// indices into `ranked`, best first). A layout joins an earlier group when its step time equals
// the group's best to 1e-9 (the same per-rank work in another shape, e.g. CP traded for
// micro-batch size), or when it has the group best's shape and a step time within
// kEquivalentStep of it: the ZeRO stage or HSDP group then moves the step by less than the
// model resolves (assumption: the kernel model's own median GEMM error is several per cent,
// README "Assumptions"), and only memory tells them apart.
inline constexpr double kEquivalentStep = 0.005;
struct CandidateGroup {
  std::vector<std::size_t> members;
};
std::vector<CandidateGroup> group_equivalent(const std::vector<ReportCandidate>& ranked);

// Why `a` beats `b` (ranked `rank_b`): the components of the step that differ most.
std::string why_winner(const ReportCandidate& a, const ReportCandidate& b, std::size_t rank_b);

// Each TP degree's best layout in `ranked` (best first), as its index, and every degree of
// `at_least` (its best not searched exhaustively: the search's tp_best_at_least), kNoLayout where
// none of its layouts was ranked.
inline constexpr std::size_t kNoLayout = static_cast<std::size_t>(-1);
std::map<std::int64_t, std::size_t> best_per_tp(const std::vector<ReportCandidate>& ranked,
                                                const std::map<std::int64_t, double>& at_least);

// The "best per TP degree" line over `ranked` (best first): each degree's best layout with its
// step and exposed TP time. A degree in `at_least` (its best not searched exhaustively: the
// search's tp_best_at_least) shows what its best is at least, and its best simulated step.
std::string best_per_tp_line(const std::vector<ReportCandidate>& ranked,
                             const std::map<std::int64_t, double>& at_least);

// Indices of the layouts no other layout beats on both step time and memory, by step time.
std::vector<std::size_t> pareto_front(const std::vector<ReportCandidate>& candidates);

}  // namespace meshsim
