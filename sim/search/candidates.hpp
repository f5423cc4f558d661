#pragma once
// The search space of `meshsim search`: every (DP, TP, PP, CP, EP, ZeRO stage, schedule,
// micro-batch, recompute) for a GPU count, with the reasons candidates are rejected before any
// simulation (divisibility, memory, dominance).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memory/memory_model.hpp"
#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "topology/gpu_spec.hpp"

namespace meshsim {

struct SearchJob {
  std::int64_t seq = 0;
  std::int64_t global_batch = 0;
  DType dtype = DType::bf16;
  bool flash_attention = true;
};

// Dimensions a user pinned (`--tp 8`), and what the space may contain.
struct SearchSpace {
  std::optional<std::int64_t> tp, pp, cp, dp, ep, mbs;
  std::optional<std::int32_t> zero;
  std::optional<Recompute> recompute;
  std::optional<Schedule> schedule;
  bool allow_tp_across_nodes = false;
  bool no_hsdp = false;  // --no-hsdp: ZeRO-3 layouts shard over all DP ranks only
  std::vector<std::int64_t> micro_batches{1, 2, 4};
  std::int64_t max_cp = 16;
};

struct Candidate {
  ParallelConfig config;
  std::int64_t micro_batch = 1;
  std::string stack;  // set when the search compares stacks (--stack a,b); else the one given
  std::string label() const;  // "tp=8 pp=4 cp=4 dp=4 ep=1 zero=1 1f1b mbs=1 recompute=none"
};

struct Enumeration {
  std::int64_t total = 0;                        // every combination considered
  std::map<std::string, std::int64_t> rejected;  // reason → count
  std::vector<Candidate> kept;
  // Of `kept`, those whose stack's own split does not fit memory but a split of its end
  // switches does (enumerate_candidates' `tune_split`).
  std::int64_t moved_layers = 0;
};

// `gpus_per_node` bounds TP unless TP may cross nodes. Memory is checked with the memory model
// against `gpu.hbm_bytes`; among candidates differing only in ZeRO stage (or recompute policy),
// the lowest stage (least recomputation) that fits dominates the others: it does strictly less
// communication (or compute) for the same layout. A layout kept at ZeRO-3 is also kept as HSDP
// with the smallest shard group that fits (Mesh::fsdp), unless `no_hsdp`.
// Candidates run `stack`'s recompute policies (apply_stack_policy): memory is checked with them,
// and selective recompute is dominated by none only where the stack's policy frees nothing.
// With `tune_split` (the search tunes the split with the stack's end switches,
// StrategyOptions::tune_split), a pipelined layout whose stack's own split leaves a stage over
// memory is kept where a split of the switches fits (fitting_end_switch_split), and its
// recompute and HSDP choices are made on that split.
Enumeration enumerate_candidates(const ModelSpec& model, const SearchJob& job, std::int64_t gpus,
                                 std::int64_t gpus_per_node, const GpuSpec& gpu,
                                 const SearchSpace& space, const MemoryOptions& memory,
                                 const Stack& stack, bool tune_split = false);

// The stack's policy for the recompute mode `c` runs: its selective regions and modules, its
// full policy's period.
void apply_stack_policy(Candidate& c, const Stack& stack);

}  // namespace meshsim
