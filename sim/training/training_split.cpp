#include "training/training_split.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "compute/kernel_time.hpp"
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
  const auto fits = split_memory_check(model, setup, capacity_bytes);
  if (model.has_architecture() && (strategy.tune_split || balanced)) {
    const auto& gpu = cm.gpu();
    if (!has_peak_flops(gpu, setup.job.dtype)) {
      // No time to weigh by (the trace builder refuses the dtype; memory alone can report it).
      if (balanced && chunks > 1)
        out.notes.push_back(fmt::format(
            "layers split evenly: train balances them by estimated time, which needs {}'s {} "
            "peak (it has none)",
            gpu.model, name_of(setup.job.dtype)));
    } else {
      // The trace builder's own choice, a tuned split with the memory check.
      StrategyOptions so = strategy;
      if (so.tune_split && !so.split_fits) so.split_fits = fits;
      out.chunk_layers = trace_chunk_layers(model, setup.job, cfg, cm, so);
      if (!own.empty() && own != out.chunk_layers) {
        // A tuned split that fits where the stack's own does not may be busier than the stack's
        // own (tuned_chunk_layers): it was chosen for memory.
        const bool for_memory =
            so.split_fits && !so.split_fits(own) && so.split_fits(out.chunk_layers);
        out.tuned_note = end_switch_note(strategy.stack, model, out.chunk_layers, own,
                                         virtual_stages(cfg), for_memory);
        out.notes.push_back(out.tuned_note);
      }
      // Stages balanced by time can overload the first stage's memory (it keeps the most
      // micro-batches in flight); when they do and an even split fits, the even split runs.
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
  // Over memory on the stack's own split, untuned: the split of its end switches that fits,
  // the fix a user would reach for before recomputing or sharding more.
  if (!strategy.tune_split && strategy.chunk_layers.empty() && chunks > 1 &&
      model.has_architecture() && !out.chunk_layers.empty()) {
    const auto stages_fit = [&](const std::vector<std::int64_t>& c) {
      return stages_within(setup_memory_per_stage(model, setup, c), capacity_bytes);
    };
    const auto f = stages_fit(out.chunk_layers);
    if (std::find(f.begin(), f.end(), false) != f.end())
      if (const auto moved = fitting_end_switch_split(strategy.stack.pipeline_split, model, chunks,
                                                      virtual_stages(cfg), stages_fit);
          !moved.empty())
        out.notes.push_back(fmt::format(
            "over memory on the stack's own split; a split its end switches give fits: {} "
            "layers per chunk (--tune-split runs the least busy split that fits)",
            fmt::join(moved, ", ")));
  }
  return out;
}

}  // namespace meshsim
