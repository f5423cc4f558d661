#pragma once
// The order in which one pipeline stage runs its forward (F), backward (B) and, for zero-bubble
// schedules, weight-gradient (W) work: GPipe (Huang et al. 2019), 1F1B (PipeDream-Flush,
// Narayanan et al. 2021), interleaved 1F1B with v model chunks per stage (Megatron-LM), and
// ZB-H1 (Qi et al. 2024: backward split into input- and weight-gradient parts; the gradient is
// sent upstream as soon as the input part is done, so the cooldown chain is shorter).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/parallel_config.hpp"

namespace meshsim {

enum class PassKind : std::uint8_t { forward, backward, weight };

struct PipelineAction {
  PassKind pass = PassKind::forward;
  std::int64_t microbatch = 0;
  std::int64_t chunk = 0;  // model chunk of this stage (0..v-1); global chunk = chunk·pp + stage
  // A forward run merged with the backward that follows it (Schedule::merges()).
  bool merged = false;
  bool operator==(const PipelineAction&) const = default;
};

// Why an interleaved schedule cannot run `m` micro-batches per step on `pp` stages, as
// Megatron-LM refuses them: with the default group (pp) m must be a multiple of pp; a group G
// must lie in [pp, m], and m mod G be 0 or at least pp (a last group that short would leave a
// stage waiting for its own chunk). Nothing for other schedules.
std::optional<std::string> interleaving_error(const Schedule& schedule, std::int64_t pp,
                                              std::int64_t m);

// The smallest micro-batch group Megatron-LM accepts for `m` micro-batches on `pp` stages (the
// fewest warm-up chunks, pp when m is a multiple of it); nothing when m < pp.
std::optional<std::int64_t> smallest_microbatch_group(std::int64_t pp, std::int64_t m);

// Throws Error("", "--schedule", ...) when the schedule cannot run this many micro-batches
// (interleaving_error).
std::vector<PipelineAction> stage_actions(const Schedule& schedule, std::int64_t pp,
                                          std::int64_t stage, std::int64_t microbatches);

// `steps` schedules of microbatches / steps one after another (TrainingJob::pipeline_steps), the
// k-th numbering its micro-batches from k · microbatches / steps; steps must divide them.
std::vector<PipelineAction> step_actions(const Schedule& schedule, std::int64_t pp,
                                         std::int64_t stage, std::int64_t microbatches,
                                         std::int64_t steps);

std::string to_string(const std::vector<PipelineAction>& actions);  // "F0 F1 B0 F2 B1 ..."

// Fixed times of one micro-batch's passes, per global chunk (chunk·pp + stage), in seconds.
struct PassTimes {
  std::vector<double> forward, backward, weight;
};
// Per stage: when its last pass ends and when that pass starts.
struct ScheduleTimes {
  std::vector<double> end_s, last_start_s;
};
// The schedule played out at fixed pass times: each stage runs its `actions` (stage_actions, one
// list per stage) one after another from time 0, a forward of chunk g > 0 after the same
// micro-batch's forward of chunk g − 1 ends, a backward of chunk g < G − 1 after the same
// micro-batch's backward of chunk g + 1 ends (no time for the transfer); a merged forward not
// before the input of the backward it is merged with. With times that are
// lower bounds on what the passes take, the ends are lower bounds on when the stages finish.
// nullopt: the orders deadlock.
std::optional<ScheduleTimes> play_schedule(const std::vector<std::vector<PipelineAction>>& actions,
                                           std::int64_t microbatches, const PassTimes& times);

}  // namespace meshsim
