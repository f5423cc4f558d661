#include "strategy/pipeline_split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "model/param_count.hpp"

namespace meshsim {

std::int64_t virtual_stages(const ParallelConfig& config) {
  return config.schedule.kind == ScheduleKind::interleaved ? config.schedule.virtual_stages : 1;
}

void check_stage_layers(const std::vector<std::int64_t>& chunk_layers, std::int64_t chunks,
                        const ModelSpec& model) {
  std::int64_t sum = 0;
  for (auto c : chunk_layers) {
    if (c < 1) throw Error("", "--stage-layers", "every stage needs at least one layer");
    sum += c;
  }
  if (static_cast<std::int64_t>(chunk_layers.size()) != chunks)
    throw Error("", "--stage-layers",
                fmt::format("gives {} stages; the mesh has {} (pp × virtual stages)",
                            chunk_layers.size(), chunks));
  if (sum != model.layers)
    throw Error("", "--stage-layers",
                fmt::format("sums to {} layers; {} has {}", sum, model.name, model.layers));
}

std::int64_t model_chunks(const ParallelConfig& config) {
  return config.mesh.pp * virtual_stages(config);
}

std::vector<std::int64_t> balanced_chunks(std::int64_t layers, std::int64_t chunks, double layer_s,
                                          double first_extra_s, double last_extra_s) {
  // Smallest bound B such that a greedy contiguous fill stays within it; the ends carry their
  // extra time. Layers are identical here (dense or MoE with dense first layers aside), so a
  // binary search over the layer count of the slowest chunk is exact.
  auto fits = [&](double bound, std::vector<std::int64_t>* out) {
    std::int64_t left = layers;
    std::vector<std::int64_t> v(static_cast<std::size_t>(chunks), 0);
    for (std::int64_t c = 0; c < chunks; ++c) {
      double extra = (c == 0 ? first_extra_s : 0.0) + (c == chunks - 1 ? last_extra_s : 0.0);
      const auto room =
          layer_s > 0 ? static_cast<std::int64_t>(std::floor((bound - extra) / layer_s + 1e-9))
                      : left;
      const std::int64_t remaining_chunks = chunks - c - 1;
      // Every chunk needs at least one layer.
      std::int64_t take = std::min(std::max<std::int64_t>(room, 1), left - remaining_chunks);
      if (take < 1) return false;
      v[static_cast<std::size_t>(c)] = take;
      left -= take;
    }
    if (left != 0) return false;
    if (out) *out = v;
    return true;
  };
  double lo = 0, hi = static_cast<double>(layers) * layer_s + first_extra_s + last_extra_s + 1;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid, nullptr) ? hi : lo) = mid;
  }
  std::vector<std::int64_t> out;
  if (!fits(hi, &out)) out = split_layers(layers, chunks);
  return out;
}

std::vector<std::int64_t> framework_chunk_layers(const PipelineSplit& split, const ModelSpec& model,
                                                 std::int64_t chunks, std::int64_t virtual_stages) {
  if (chunks < 1 || chunks > model.layers) return {};  // the mesh checks say why
  switch (split.method) {
    case PipelineSplitMethod::balanced:
      return {};
    case PipelineSplitMethod::even: {
      const auto run = runnable_split(split, model.layers, chunks);
      const auto units = model.layers + run.embedding_layers + run.loss_layers;
      if (run.must_divide && units % chunks != 0 && virtual_stages == 1 &&
          run.embedding_layers + run.loss_layers == 0)
        if (auto ends = uneven_ends_chunk_layers(model.layers, chunks); !ends.empty()) return ends;
      return even_chunk_layers(model.layers, chunks, run.embedding_layers, run.loss_layers);
    }
    case PipelineSplitMethod::parameters: {
      if (!model.has_architecture()) return split_layers(model.layers, chunks);
      const auto p = count_params(model);
      // The head: its own matrix, or the embedding's when tied (DeepSpeed's TiedLayerSpec
      // keeps a copy on each end); the final norm beside it.
      const double head = (p.output > 0 ? p.output : p.embedding) + norm_params(model);
      return balanced_chunks(model.layers, chunks, layer_params(model, model.layers - 1),
                             p.embedding, head);
    }
  }
  return {};
}

std::string framework_split_note(const Stack& stack, const ModelSpec& model, std::int64_t chunks,
                                 std::int64_t virtual_stages) {
  if (stack.pipeline_split.method != PipelineSplitMethod::even || chunks < 2 ||
      chunks > model.layers)
    return "";
  const auto s = runnable_split(stack.pipeline_split, model.layers, chunks);
  const std::int64_t units = model.layers + s.embedding_layers + s.loss_layers;
  const std::int64_t per = units / chunks, rem = units % chunks;
  const std::string weights = s.embedding_layers + s.loss_layers > 0
                                  ? fmt::format(" (the embedding counted as {} and the loss as {})",
                                                s.embedding_layers, s.loss_layers)
                                  : "";
  // even_chunk_layers drops the ends' weights when an end would keep no layer (the last chunk
  // never takes one of the remainder).
  if (per + (rem > 0 ? 1 : 0) - s.embedding_layers < 1 || per - s.loss_layers < 1)
    return fmt::format(
        "stack '{}' splits {} layers{} into {} pipeline chunks; that leaves an end chunk no "
        "layer, so the layers were split evenly",
        stack.name, model.layers, weights, chunks);
  if (rem != 0 && s.must_divide) {
    // framework_chunk_layers' uneven split, where it runs one.
    if (virtual_stages == 1 && s.embedding_layers + s.loss_layers == 0)
      if (const auto ends = uneven_ends_chunk_layers(model.layers, chunks); !ends.empty())
        return fmt::format(
            "stack '{}' splits the layers evenly, and {} do not divide into {} pipeline stages, "
            "as they are or with the ends weighed: the first and last stage take {} and {}, the "
            "others {} (Megatron-LM's --decoder-first/last-pipeline-num-layers)",
            stack.name, model.layers, chunks, ends.front(), ends.back(), ends[1]);
    return fmt::format(
        "stack '{}' splits the layers evenly, and {}{} do not divide into {} pipeline chunks: its "
        "framework needs them to or the split given (--stage-layers; Megatron-LM's "
        "--decoder-first/last-pipeline-num-layers); simulated with the first {} one layer more",
        stack.name, model.layers, weights, chunks, rem);
  }
  if (!(s == stack.pipeline_split))
    return fmt::format(
        "stack '{}' splits the layers evenly, and {} divide into {} pipeline chunks only with {} "
        "counted as a layer (Megatron-LM's --account-for-embedding/loss-in-pipeline-split): {} "
        "units a chunk",
        stack.name, model.layers, chunks,
        s.embedding_layers > 0 && s.loss_layers > 0 ? "the embedding and the loss each"
        : s.embedding_layers > 0                    ? "the embedding"
                                                    : "the loss",
        per);
  return "";
}

}  // namespace meshsim
