#pragma once
// How a run's layers are cut into pipeline chunks: meshsim's split balanced by estimated time,
// and the split the stack's framework runs (Stack::pipeline_split).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "stack/stack.hpp"

namespace meshsim {

// Global model chunks of a layout: pp × virtual stages of an interleaved schedule.
std::int64_t model_chunks(const ParallelConfig& config);

// Layers per chunk balancing a per-layer cost: the first chunk also carries `first_extra`, the
// last `last_extra` (time: Narayanan et al. note the unequal ends, the seed guide advises
// balancing stages by time and memory; parameters: DeepSpeed's partition by parameters).
// Contiguous chunks minimising the largest one; every chunk keeps a layer.
std::vector<std::int64_t> balanced_chunks(std::int64_t layers, std::int64_t chunks, double layer_s,
                                          double first_extra_s, double last_extra_s);
// The same with a cost per layer (`layer_cost[l]` for layer l): a model whose layers differ
// (DeepSeek's dense first layers before its MoE layers) is balanced by what each layer weighs.
// Hand example: costs 1, 1, 1, 1, 4, 4 in 3 chunks → 4, 1, 1 (4 each; equal costs would give
// 2, 2, 2); with the first chunk 2 more → 3, 2, 1 (5, 5, 4).
std::vector<std::int64_t> balanced_chunks(const std::vector<double>& layer_cost,
                                          std::int64_t chunks, double first_extra,
                                          double last_extra);

// The layers per chunk the framework of `split` runs for `model` in `chunks` chunks; empty for a
// `balanced` split (the trace builder balances by the layers' estimated time) and for more
// chunks than layers (the mesh checks' error). `parameters`
// weighs each layer's parameters (DeepSeek's dense first layers fewer than its MoE layers)
// against the embedding table (first chunk) and the head with the final norm (last chunk; the
// head's matrix even when tied, as each end holds it), each counted as DeepSpeed counts them,
// the parameters of the modules a rank builds: an MoE layer's routed experts over
// `expert_parallel` ranks (DeepSpeed-MoE builds experts / EP of them); tensor parallelism
// shards the layers and both ends alike, so their ratios are the whole model's (named
// assumption: the norms, which it does not shard, are left at their whole size).
// `virtual_stages`: the chunks a pipeline stage holds (interleaving); a framework that needs the
// units to divide and gets none that do (runnable_split) runs Megatron's uneven split
// (uneven_ends_chunks), and where that has none (layers not a multiple of the virtual stages)
// the even split with the first chunks one layer more (which Megatron-LM would refuse:
// framework_split_note says so).
std::vector<std::int64_t> framework_chunk_layers(const PipelineSplit& split, const ModelSpec& model,
                                                 std::int64_t chunks,
                                                 std::int64_t virtual_stages = 1,
                                                 std::int64_t expert_parallel = 1);
// framework_chunk_layers of a layout: its chunks, virtual stages and expert parallelism.
std::vector<std::int64_t> framework_chunk_layers(const PipelineSplit& split, const ModelSpec& model,
                                                 const ParallelConfig& config);

// A note when the stack's `even` split was not run as the stack states it: its framework needs
// the units to divide (PipelineSplit::must_divide) and only a weighting of the ends divides them
// (runnable_split), or none does (Megatron's uneven split, uneven_ends_chunks; where it has none,
// the first chunks one more, as torchtitan does, which Megatron-LM refuses), or a weighted end
// would keep no layer. Empty otherwise.
std::string framework_split_note(const Stack& stack, const ModelSpec& model, std::int64_t chunks,
                                 std::int64_t virtual_stages = 1);

// Megatron's uneven split of `layers` over `chunks` = pp × `virtual_stages` chunks when they do
// not divide: uneven_ends_chunk_layers (stack/stack.hpp) in units of `virtual_stages` layers, each
// stage's layers spread evenly over its virtual stages (chunk g is stage g mod pp's). Hand
// example: 80 layers on 6 stages × 2 → stages 12, 14 × 4, 12; chunks 6, 7 × 4, 6 twice. Empty
// where the layers are not a multiple of the virtual stages or an end would keep no layer.
std::vector<std::int64_t> uneven_ends_chunks(std::int64_t layers, std::int64_t chunks,
                                             std::int64_t virtual_stages);

// The splits the framework's end switches (PipelineSplit::end_switches) give `model` in
// `chunks` chunks, framework_chunk_layers' own first; only that one where the stack has no
// switches, and none for a `balanced` split. `layers`: the ends weighed as a layer or not where
// the units then divide, and every first and last stage count that leaves the middle stages an
// even, positive share, each stage's count a multiple of its virtual stages (a chunk is the
// stage's count over them). `weights`: the ends weighed 0 to kMaxEndWeight
// layers each. Repeats are kept (the choice below takes the first of equals).
std::vector<std::vector<std::int64_t>> end_switch_splits(const PipelineSplit& split,
                                                         const ModelSpec& model,
                                                         std::int64_t chunks,
                                                         std::int64_t virtual_stages = 1);

// Of end_switch_splits, the one whose busiest pipeline stage has the least estimated time: a
// layer `layer_s`, the first chunk `first_extra_s` more (the embedding), the last chunk
// `last_extra_s` (the head and loss), a stage the sum of its chunks (chunk c on stage c mod pp).
// Ties keep the earlier split, so the framework's own wins where nothing is better; where `fits`
// is given, a split replaces the framework's own only if it passes (asked of the framework's own
// and of splits less busy than the best so far), and where the framework's own does not pass,
// the least busy split that does replaces it (every split is asked until one passes). What
// `search` runs (StrategyOptions::tune_split); empty where end_switch_splits is.
std::vector<std::int64_t> tuned_chunk_layers(
    const PipelineSplit& split, const ModelSpec& model, std::int64_t chunks,
    std::int64_t virtual_stages, double layer_s, double first_extra_s, double last_extra_s,
    const std::function<bool(const std::vector<std::int64_t>&)>& fits = {});
// The same with each layer's time (`layer_s[l]` for layer l; DeepSeek's dense first layers
// weigh less than its MoE layers).
std::vector<std::int64_t> tuned_chunk_layers(
    const PipelineSplit& split, const ModelSpec& model, std::int64_t chunks,
    std::int64_t virtual_stages, const std::vector<double>& layer_s, double first_extra_s,
    double last_extra_s, const std::function<bool(const std::vector<std::int64_t>&)>& fits = {});

// Whether each pipeline stage of a split (layers per chunk) fits, by stage.
using StageFits = std::function<std::vector<bool>(const std::vector<std::int64_t>&)>;

// A split of the stack's end switches whose every stage fits by `stage_fits`, for a layout
// whose framework split leaves a stage over memory: Megatron-LM's users move layers off that
// stage (--decoder-first/last-pipeline-num-layers) before they recompute or shard more. A
// stage's memory grows with its own layers, so for Megatron's first/last-stage family the
// middle stages take the most that fit them, the first stage the most that fits it of the rest
// and the last stage what is left (about 2·log2(layers) calls); for torchtitan's weights the
// first of end_switch_splits that fits. Empty where none fits, the layers are no multiple of
// the virtual stages, or the stack has no switches. Hand example (tests): 32 layers on 4
// stages whose first stage holds at most 6, the others 9: 9 on each middle stage, 6 first, 8
// last.
std::vector<std::int64_t> fitting_end_switch_split(const PipelineSplit& split,
                                                   const ModelSpec& model, std::int64_t chunks,
                                                   std::int64_t virtual_stages,
                                                   const StageFits& stage_fits);

// The ends' weights under which the framework's even split (framework_chunk_layers with those
// weights) runs exactly `chunk_layers`: the split's own first, then each from 0 to kMaxEndWeight
// (only 0 and 1 for a framework that needs the units to divide, which Megatron's account flags
// say). Nothing where no weighting gives them.
std::optional<PipelineSplit> weights_giving(const PipelineSplit& split, const ModelSpec& model,
                                            const std::vector<std::int64_t>& chunk_layers,
                                            std::int64_t virtual_stages = 1);

// The note of a split tuned with the stack's end switches (`chunk_layers`; the stack's own is
// `own`): the switches that give it, as the framework names them, and why: to balance the
// stages' time, or `for_memory`, to fit where the stack's own split does not.
std::string end_switch_note(const Stack& stack, const ModelSpec& model,
                            const std::vector<std::int64_t>& chunk_layers,
                            const std::vector<std::int64_t>& own, std::int64_t virtual_stages = 1,
                            bool for_memory = false);

// A split given by the user (--stage-layers): one positive count per chunk, summing to the
// model's layers; an Error naming --stage-layers otherwise.
void check_stage_layers(const std::vector<std::int64_t>& chunk_layers, std::int64_t chunks,
                        const ModelSpec& model);

// The virtual stages of a layout: an interleaved schedule's, else 1.
std::int64_t virtual_stages(const ParallelConfig& config);

}  // namespace meshsim
