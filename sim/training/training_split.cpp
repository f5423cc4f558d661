#include "training/training_split.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "parallel/parallel_config.hpp"
#include "strategy/pipeline_split.hpp"
#include "strategy/trace_builder.hpp"

namespace meshsim {

TrainingSplit training_split(const ModelSpec& model, const TrainingSetup& setup,
                             const ComputeModel& cm, double capacity_bytes) {
  TrainingSplit out;
  const auto& cfg = setup.config;
  const auto& strategy = setup.strategy;
  if (!strategy.chunk_layers.empty()) {
    out.chunk_layers = strategy.chunk_layers;
    return out;
  }
  const auto chunks = model_chunks(cfg);
  const auto own = framework_chunk_layers(strategy.stack.pipeline_split, model, cfg);
  const bool balanced = strategy.stack.pipeline_split.method == PipelineSplitMethod::balanced;
  // Estimated times need the GPU's peak for the job's dtype (train refuses FP8 on an A100):
  // without it a balanced stack's layers stay split evenly, as memory alone can report them.
  const auto& gpu = cm.gpu();
  const bool priced = gpu.peak_flops.find(name_of(setup.job.dtype)) != gpu.peak_flops.end();
  if (strategy.tune_split && !priced)
    throw Error("", "--tune-split",
                fmt::format("{} has no {} tensor-core peak to estimate the stages' time", gpu.model,
                            name_of(setup.job.dtype)));
  if (model.has_architecture() && (strategy.tune_split || balanced)) {
    if (!priced) {
      if (chunks > 1)
        out.notes.push_back(fmt::format(
            "layers split evenly: train balances them by estimated time, which needs {}'s {} "
            "peak (it has none)",
            gpu.model, name_of(setup.job.dtype)));
    } else {
      // The trace builder's own choice, with the memory check simulate_training sets.
      StrategyOptions so = strategy;
      if (so.tune_split && !so.split_fits)
        so.split_fits = split_memory_check(model, setup, capacity_bytes);
      out.chunk_layers = trace_chunk_layers(model, setup.job, cfg, cm, so);
      if (!own.empty() && own != out.chunk_layers)
        out.notes.push_back(
            end_switch_note(strategy.stack, model, out.chunk_layers, own, virtual_stages(cfg)));
      const auto fits = [&](const std::vector<std::int64_t>& c) {
        return worst_stage(setup_memory_per_stage(model, setup, c)).total() <= capacity_bytes;
      };
      // As simulate_training: stages balanced by time that do not fit fall back to an even
      // split that does.
      if (const auto even = split_layers(model.layers, chunks);
          balanced && chunks > 1 && even != out.chunk_layers && !fits(out.chunk_layers) &&
          fits(even)) {
        out.chunk_layers = even;
        out.notes.emplace_back(kEvenFallbackNote);
      }
    }
  }
  if (out.chunk_layers.empty()) {
    out.chunk_layers = own;
    if (auto n = framework_split_note(strategy.stack, model, chunks, virtual_stages(cfg));
        !n.empty())
      out.notes.push_back(std::move(n));
  }
  // The memory model's own even split where nothing above gave one.
  if (out.chunk_layers.empty() && model.has_architecture() && chunks <= model.layers)
    out.chunk_layers = split_layers(model.layers, chunks);
  return out;
}

}  // namespace meshsim
