#pragma once
// How a training job runs on its mesh: sharding of model state (DDP, ZeRO-1/2/3, FSDP2),
// sequence parallelism, pipeline schedule, activation recomputation.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/mesh.hpp"
#include "stack/stack.hpp"

namespace meshsim {

// one_f_one_b_overlap ("1f1b-overlap", pp = 1 only): the micro-batches' passes as F0, then each
// forward merged with the backward of the micro-batch before it, then the last backward; a
// merged pair's pieces interleave on the compute stream so each pass's EP all-to-alls run under
// the other's compute: the overlapped forward-and-backward chunk of DeepSeek-V3's DualPipe
// (arXiv 2412.19437 §3.2.1), Megatron-Core's combined 1F1B without pipelining. On a
// pipeline a merged pair's backward would wait for the whole pair downstream (the stages'
// warm-ups differ by one micro-batch, so each pair waits for its neighbour's); DualPipe's two
// directions are not modelled.
// interleaved with `overlap` ("interleaved-overlap:V", V ≥ 2): the same merging on Megatron's
// interleaved schedule, Megatron-Core's combined 1F1B with virtual pipeline stages
// (--overlap-moe-expert-parallel-comm): each steady-state forward merged with the backward after
// it. There the stages' warm-ups
// differ by two chunks, so a pair's inputs arrive while the pair before it runs
// (tests/strategy/pipeline_schedule_test.cpp plays it out); only the pipeline transfers, which
// the plain order hides under a pair's other pass, land on the critical path once per pair.
enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zero_bubble, one_f_one_b_overlap };
struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  std::int64_t virtual_stages = 1;  // interleaved 1F1B: model chunks per pipeline rank
  bool overlap = false;             // interleaved: steady-state forward and backward merged
  // interleaved: consecutive micro-batches a virtual stage runs before the next chunk's
  // (Megatron-LM's --microbatch-group-size-per-virtual-pipeline-stage, Llama 3's N); 0: pp,
  // Megatron's default (depth-first).
  std::int64_t group = 0;
  bool operator==(const Schedule&) const = default;
  // Whether the schedule merges a forward with a backward (1f1b-overlap, interleaved-overlap).
  bool merges() const { return kind == ScheduleKind::one_f_one_b_overlap || overlap; }
};
std::string to_string(const Schedule& s);  // "gpipe", "1f1b", "interleaved:2", "zb", ...
// The schedule's family as a stack names the ones it runs (Stack::schedules): "gpipe", "1f1b"
// (interleaving one chunk is 1F1B), "interleaved", "interleaved-overlap", "zb", "1f1b-overlap".
std::string_view schedule_family(const Schedule& s);
// "gpipe", "1f1b", "interleaved:V", "interleaved-overlap:V", either with ":G" (the micro-batch
// group), "zb", "1f1b-overlap"; errors name `where`.
Schedule parse_schedule(std::string_view text, const std::string& where);

struct ParallelConfig {
  Mesh mesh;
  // 0: DDP (replicated state); 1: optimizer state sharded; 2: + gradients; 3: + weights
  // (ZeRO-3, FSDP/FSDP2 FULL_SHARD).
  std::int32_t zero = 0;
  // FSDP2 reshard_after_forward: free gathered weights after each layer's forward (true) or keep
  // them until backward (false, ZeRO++/"SHARD_GRAD_OP"-like for the weights).
  bool reshard_after_forward = true;
  bool sp = false;
  Recompute recompute = Recompute::none;
  // A selective policy's regions (stack/stack.hpp RecomputePolicy); empty: Korthikanti et al.'s
  // attention-score set. `recompute_modules`: the stack's module names they came from (Megatron's
  // --recompute-modules), empty for a policy of the stack file.
  std::vector<RecomputeUnit> recompute_units;
  std::vector<std::string> recompute_modules;
  // Full recompute on every `recompute_every`-th layer of a model chunk only (torchtitan's
  // `layer` policy, selective_ac_option N: its wrapper counts the blocks it wraps on a rank, so
  // a stage checkpoints its N-th, 2N-th, ... block; a rank's later chunks are counted from their
  // own first block, where torchtitan's count runs on across them); 1: every layer.
  std::int32_t recompute_every = 1;
  // Megatron's --recompute-method block --recompute-num-layers N: full recompute of the first N
  // layers of each model chunk only, the others keep their activations (0: every layer).
  std::int32_t recompute_block = 0;
  // Megatron's --recompute-method uniform --recompute-num-layers N: each group of N layers of a
  // chunk keeps one checkpoint (its input) and backward rebuilds the group's N layers at once.
  std::int32_t recompute_group = 1;
  Schedule schedule;

  // Whether the `index_in_chunk`-th layer (0-based) of a model chunk re-runs its forward in
  // backward.
  bool checkpointed(std::int64_t index_in_chunk) const {
    return recompute == Recompute::full && (index_in_chunk + 1) % recompute_every == 0 &&
           (recompute_block == 0 || index_in_chunk < recompute_block);
  }
};

// The recompute mode as reports name it: "selective (moe_act, layernorm)" when it recomputes
// the stack's modules, "full (block 4)" / "full (uniform 2)" for Megatron's partial or grouped
// full recompute, else the mode ("none", "selective", "full").
std::string recompute_label(const ParallelConfig& c);

// Megatron's --recompute-method (uniform | block) with --recompute-num-layers `layers` on a full
// recompute: sets recompute_group or recompute_block. An Error naming `where` for another method,
// a count outside 1..65536, or a config that is not a full recompute of every layer.
void set_recompute_method(ParallelConfig& c, std::string_view method, std::int64_t layers,
                          const std::string& where);

// Layers of each pipeline stage (in order); `stages` = pp · virtual stages chunks. Equal
// shares, the remainder going to the middle chunks (the first chunk also runs the embedding and
// the last the logits).
std::vector<std::int64_t> split_layers(std::int64_t layers, std::int64_t chunks);

}  // namespace meshsim
