#pragma once
// How a run's layers are cut into pipeline chunks: meshsim's split balanced by estimated time,
// and the split the stack's framework runs (Stack::pipeline_split).
#include <cstdint>
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

// The layers per chunk the framework of `split` runs for `model` in `chunks` chunks; empty for a
// `balanced` split (the trace builder balances by the layers' estimated time) and for more
// chunks than layers (the mesh checks' error). `parameters`
// weighs a middle layer's parameters against the embedding table (first chunk) and the head
// with the final norm (last chunk; the head's matrix even when tied, as each end holds it).
// `virtual_stages`: the chunks a pipeline stage holds (interleaving); a framework that needs the
// units to divide and gets none that do (runnable_split) runs Megatron's uneven split
// (uneven_ends_chunk_layers) without interleaving, and the even split with the first chunks one
// layer more with it (which Megatron-LM would refuse: framework_split_note says so).
std::vector<std::int64_t> framework_chunk_layers(const PipelineSplit& split, const ModelSpec& model,
                                                 std::int64_t chunks,
                                                 std::int64_t virtual_stages = 1);

// A note when the stack's `even` split was not run as the stack states it: its framework needs
// the units to divide (PipelineSplit::must_divide) and only a weighting of the ends divides them
// (runnable_split), or none does (Megatron's uneven split without interleaving; with it, the
// first chunks one more, as torchtitan does, which Megatron-LM refuses), or a weighted end would
// keep no layer. Empty otherwise.
std::string framework_split_note(const Stack& stack, const ModelSpec& model, std::int64_t chunks,
                                 std::int64_t virtual_stages = 1);

// A split given by the user (--stage-layers): one positive count per chunk, summing to the
// model's layers; an Error naming --stage-layers otherwise.
void check_stage_layers(const std::vector<std::int64_t>& chunk_layers, std::int64_t chunks,
                        const ModelSpec& model);

// The virtual stages of a layout: an interleaved schedule's, else 1.
std::int64_t virtual_stages(const ParallelConfig& config);

}  // namespace meshsim
