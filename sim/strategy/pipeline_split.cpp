#include "strategy/pipeline_split.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  return balanced_chunks(
      std::vector<double>(static_cast<std::size_t>(std::max<std::int64_t>(layers, 0)), layer_s),
      chunks, first_extra_s, last_extra_s);
}

std::vector<std::int64_t> balanced_chunks(const std::vector<double>& layer_cost,
                                          std::int64_t chunks, double first_extra,
                                          double last_extra) {
  const auto layers = static_cast<std::int64_t>(layer_cost.size());
  if (chunks < 1) return {};
  if (chunks > layers) return split_layers(layers, chunks);
  // Smallest bound B such that a greedy contiguous fill places every layer (greedy is exact for
  // whether a bound can be met: a chunk taking as many layers as fit never hurts the next); the
  // ends carry their extra cost, and every chunk keeps a layer even where that one exceeds B
  // (an end heavier than the bound then leaves the other chunks balanced among themselves).
  auto fits = [&](double bound, std::vector<std::int64_t>* out) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(chunks), 0);
    std::int64_t next = 0;
    for (std::int64_t c = 0; c < chunks; ++c) {
      double load = (c == 0 ? first_extra : 0.0) + (c == chunks - 1 ? last_extra : 0.0);
      const std::int64_t last_allowed = layers - (chunks - c - 1);  // leave one per later chunk
      std::int64_t take = 0;
      while (next + take < last_allowed) {
        const double w = layer_cost[static_cast<std::size_t>(next + take)];
        // At least one layer; more while within the bound, to rounding.
        if (take > 0 && load + w > bound + 1e-9 * std::max(w, 1e-300)) break;
        load += w;
        ++take;
      }
      if (c == chunks - 1 && next + take != layers) return false;
      v[static_cast<std::size_t>(c)] = take;
      next += take;
    }
    if (out) *out = v;
    return true;
  };
  double hi = first_extra + last_extra + 1;
  for (auto w : layer_cost) hi += w;
  double lo = 0;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid, nullptr) ? hi : lo) = mid;
  }
  std::vector<std::int64_t> out;
  if (!fits(hi, &out)) out = split_layers(layers, chunks);
  return out;
}

std::vector<std::int64_t> uneven_ends_chunks(std::int64_t layers, std::int64_t chunks,
                                             std::int64_t virtual_stages) {
  const std::int64_t v = std::max<std::int64_t>(virtual_stages, 1);
  if (layers % v != 0 || chunks % v != 0) return {};
  // In units of v layers: a stage's count over its virtual stages is one chunk's.
  const auto stage = uneven_ends_chunk_layers(layers / v, chunks / v);
  if (stage.empty()) return {};
  std::vector<std::int64_t> out(static_cast<std::size_t>(chunks));
  for (std::size_t g = 0; g < out.size(); ++g) out[g] = stage[g % stage.size()];
  return out;
}

std::vector<std::int64_t> framework_chunk_layers(const PipelineSplit& split, const ModelSpec& model,
                                                 const ParallelConfig& config) {
  return framework_chunk_layers(split, model, model_chunks(config), virtual_stages(config),
                                config.mesh.ep);
}

std::vector<std::int64_t> framework_chunk_layers(const PipelineSplit& split, const ModelSpec& model,
                                                 std::int64_t chunks, std::int64_t virtual_stages,
                                                 std::int64_t expert_parallel) {
  if (chunks < 1 || chunks > model.layers) return {};  // the mesh checks say why
  switch (split.method) {
    case PipelineSplitMethod::balanced:
      return {};
    case PipelineSplitMethod::even: {
      const auto run = runnable_split(split, model.layers, chunks);
      const auto units = model.layers + run.embedding_layers + run.loss_layers;
      if (run.must_divide && units % chunks != 0 && run.embedding_layers + run.loss_layers == 0)
        if (auto ends = uneven_ends_chunks(model.layers, chunks, virtual_stages); !ends.empty())
          return ends;
      return even_chunk_layers(model.layers, chunks, run.embedding_layers, run.loss_layers);
    }
    case PipelineSplitMethod::parameters: {
      if (!model.has_architecture()) return split_layers(model.layers, chunks);
      const auto p = count_params(model);
      // The head: its own matrix, or the embedding's when tied (DeepSpeed's TiedLayerSpec
      // keeps a copy on each end); the final norm beside it.
      const double head = (p.output > 0 ? p.output : p.embedding) + norm_params(model);
      std::vector<double> layer(static_cast<std::size_t>(model.layers));
      for (std::int64_t l = 0; l < model.layers; ++l)
        layer[static_cast<std::size_t>(l)] = layer_params_on_rank(model, l, expert_parallel);
      return balanced_chunks(layer, chunks, p.embedding, head);
    }
  }
  return {};
}

namespace {

// Megatron's --decoder-first/last-pipeline-num-layers split into `v` (pp × vs chunks): the first
// stage `first` layers, the last `last`, each middle stage `mid`, each stage's layers spread
// evenly over its `vs` virtual stages (chunk g is stage g mod pp's), so every count is a multiple
// of them (Megatron-Core's get_num_layers_to_build; megatron_uneven_chunks reads it back).
void first_last_chunks(std::vector<std::int64_t>& v, std::int64_t pp, std::int64_t vs,
                       std::int64_t first, std::int64_t mid, std::int64_t last) {
  std::fill(v.begin(), v.end(), mid / vs);
  for (std::int64_t j = 0; j < vs; ++j) {
    v[static_cast<std::size_t>(j * pp)] = first / vs;
    v[static_cast<std::size_t>(j * pp + pp - 1)] = last / vs;
  }
}

// Calls `on` with each split end_switch_splits lists, in its order (one buffer for the
// first/last-stage family: a search prices the splits of every pipelined candidate).
template <class On>
void for_each_end_switch_split(const PipelineSplit& split, const ModelSpec& model,
                               std::int64_t chunks, std::int64_t virtual_stages, On on) {
  const auto own = framework_chunk_layers(split, model, chunks, virtual_stages);
  if (own.empty()) return;
  on(own);
  if (split.method != PipelineSplitMethod::even || chunks < 2) return;
  const std::int64_t layers = model.layers;
  switch (split.end_switches) {
    case EndSwitches::none:
      break;
    case EndSwitches::layers: {
      // Megatron's account flags: only where the weighed units divide (runnable_split keeps a
      // weighting that does not, and framework_chunk_layers would then split otherwise).
      for (std::int32_t e = 0; e <= 1; ++e)
        for (std::int32_t l = 0; l <= 1; ++l)
          if (weighted_units_divide(layers, chunks, e, l))
            on(even_chunk_layers(layers, chunks, e, l));
      // --decoder-first/last-pipeline-num-layers: the first stage `a` layers, the last the rest
      // of `ends`, the (pp − 2) middle stages `mid` each (first_last_chunks).
      const std::int64_t vs = std::max<std::int64_t>(virtual_stages, 1);
      if (chunks % vs != 0) break;
      const std::int64_t pp = chunks / vs, middle_stages = pp - 2;
      if (pp < 2) break;
      std::vector<std::int64_t> v(static_cast<std::size_t>(chunks));
      for (std::int64_t mid = middle_stages > 0 ? vs : 0;; mid += vs) {
        const std::int64_t ends = layers - middle_stages * mid;
        if (ends < 2 * vs) break;
        for (std::int64_t a = vs; a + vs <= ends; a += vs) {
          if ((ends - a) % vs != 0) continue;
          first_last_chunks(v, pp, vs, a, mid, ends - a);
          on(v);
        }
        if (middle_stages == 0) break;
      }
      break;
    }
    case EndSwitches::weights:
      for (std::int32_t e = 0; e <= kMaxEndWeight; ++e)
        for (std::int32_t l = 0; l <= kMaxEndWeight; ++l) {
          PipelineSplit w = split;
          w.embedding_layers = e;
          w.loss_layers = l;
          on(framework_chunk_layers(w, model, chunks, virtual_stages));
        }
      break;
  }
}

}  // namespace

std::vector<std::vector<std::int64_t>> end_switch_splits(const PipelineSplit& split,
                                                         const ModelSpec& model,
                                                         std::int64_t chunks,
                                                         std::int64_t virtual_stages) {
  std::vector<std::vector<std::int64_t>> out;
  for_each_end_switch_split(split, model, chunks, virtual_stages,
                            [&](const std::vector<std::int64_t>& v) { out.push_back(v); });
  return out;
}

std::vector<std::int64_t> tuned_chunk_layers(
    const PipelineSplit& split, const ModelSpec& model, std::int64_t chunks,
    std::int64_t virtual_stages, double layer_s, double first_extra_s, double last_extra_s,
    const std::function<bool(const std::vector<std::int64_t>&)>& fits) {
  return tuned_chunk_layers(
      split, model, chunks, virtual_stages,
      std::vector<double>(static_cast<std::size_t>(std::max<std::int64_t>(model.layers, 0)),
                          layer_s),
      first_extra_s, last_extra_s, fits);
}

std::vector<std::int64_t> tuned_chunk_layers(
    const PipelineSplit& split, const ModelSpec& model, std::int64_t chunks,
    std::int64_t virtual_stages, const std::vector<double>& layer_s, double first_extra_s,
    double last_extra_s, const std::function<bool(const std::vector<std::int64_t>&)>& fits) {
  const auto pp = static_cast<std::size_t>(
      std::max<std::int64_t>(chunks / std::max<std::int64_t>(virtual_stages, 1), 1));
  // Prefix sums of the layers' times: a chunk's time is a difference of two.
  std::vector<double> upto(layer_s.size() + 1, 0.0);
  for (std::size_t l = 0; l < layer_s.size(); ++l) upto[l + 1] = upto[l] + layer_s[l];
  std::vector<double> stage(pp);
  std::vector<std::int64_t> best;
  double best_s = 0;
  bool best_fits = true;  // false only for the framework's own, where `fits` refuses it
  for_each_end_switch_split(
      split, model, chunks, virtual_stages, [&](const std::vector<std::int64_t>& v) {
        std::fill(stage.begin(), stage.end(), 0.0);
        std::size_t first = 0;
        for (std::size_t c = 0; c < v.size(); ++c) {
          const auto end = std::min(first + static_cast<std::size_t>(v[c]), layer_s.size());
          stage[c % pp] += upto[end] - upto[std::min(first, end)];
          first = end;
        }
        stage.front() += first_extra_s;
        stage[(v.size() - 1) % pp] += last_extra_s;
        const double busiest = *std::max_element(stage.begin(), stage.end());
        if (best.empty()) {
          best = v;
          best_s = busiest;
          best_fits = !fits || fits(v);
          return;
        }
        // A relative margin: a split as busy as an earlier one, to rounding, does not replace
        // it; any split that fits replaces a framework's own that does not.
        if ((!best_fits || busiest < best_s * (1 - 1e-12)) && (!fits || fits(v))) {
          best = v;
          best_s = busiest;
          best_fits = true;
        }
      });
  return best;
}

std::vector<std::int64_t> fitting_end_switch_split(const PipelineSplit& split,
                                                   const ModelSpec& model, std::int64_t chunks,
                                                   std::int64_t virtual_stages,
                                                   const StageFits& stage_fits) {
  const auto all_true = [](auto first, auto last) {
    return std::all_of(first, last, [](bool b) { return b; });
  };
  if (split.method != PipelineSplitMethod::even || chunks < 2) return {};
  if (split.end_switches == EndSwitches::none) return {};
  if (split.end_switches == EndSwitches::weights) {
    for (const auto& v : end_switch_splits(split, model, chunks, virtual_stages))
      if (const auto f = stage_fits(v); all_true(f.begin(), f.end())) return v;
    return {};
  }
  // Megatron's first/last-stage family (for_each_end_switch_split), in units of the virtual
  // stages: a stage's memory grows with its own layers, so the middle stages take the most
  // that fits them, the first stage the most that fits it of the rest, and the last stage what
  // is left, if it fits.
  const std::int64_t vs = std::max<std::int64_t>(virtual_stages, 1);
  const std::int64_t layers = model.layers;
  if (chunks % vs != 0 || layers % vs != 0) return {};
  const std::int64_t pp = chunks / vs, middle = pp - 2;
  if (pp < 2) return {};
  std::vector<std::int64_t> v(static_cast<std::size_t>(chunks));
  const auto fits_of = [&](std::int64_t first_units, std::int64_t mid_units) {
    const std::int64_t first = first_units * vs, mid = mid_units * vs;
    first_last_chunks(v, pp, vs, first, mid, layers - middle * mid - first);
    return stage_fits(v);
  };
  // The largest k in [lo, hi] with ok(k), lo's tried first; 0 where not even lo is.
  const auto largest = [](std::int64_t lo, std::int64_t hi, const auto& ok) -> std::int64_t {
    if (hi < lo || !ok(lo)) return 0;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo + 1) / 2;
      if (ok(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };
  const std::int64_t units = layers / vs;
  std::int64_t mid_units = 0;
  if (middle > 0) {
    // The ends keep a unit each; the middle stages' fit does not depend on how the ends share
    // theirs (an even share is priced).
    mid_units = largest(1, (units - 2) / middle, [&](std::int64_t k) -> bool {
      const auto f = fits_of((units - middle * k) / 2, k);
      return all_true(f.begin() + 1, f.end() - 1);
    });
    if (mid_units == 0) return {};
  }
  const std::int64_t ends = units - middle * mid_units;
  const std::int64_t first_units =
      largest(1, ends - 1, [&](std::int64_t a) -> bool { return fits_of(a, mid_units).front(); });
  if (first_units == 0) return {};
  const auto f = fits_of(first_units, mid_units);  // and `v` is that split
  if (!all_true(f.begin(), f.end())) return {};
  return v;
}

std::optional<PipelineSplit> weights_giving(const PipelineSplit& split, const ModelSpec& model,
                                            const std::vector<std::int64_t>& chunk_layers,
                                            std::int64_t virtual_stages) {
  if (split.method != PipelineSplitMethod::even) return std::nullopt;
  const auto chunks = static_cast<std::int64_t>(chunk_layers.size());
  const auto gives = [&](const PipelineSplit& w) {
    return framework_chunk_layers(w, model, chunks, virtual_stages) == chunk_layers;
  };
  if (gives(runnable_split(split, model.layers, chunks)))
    return runnable_split(split, model.layers, chunks);
  const std::int32_t most = split.must_divide ? 1 : kMaxEndWeight;
  for (std::int32_t e = 0; e <= most; ++e)
    for (std::int32_t l = 0; l <= most; ++l) {
      PipelineSplit w = split;
      w.embedding_layers = e;
      w.loss_layers = l;
      // A framework that needs the units to divide says only weightings that do.
      if (split.must_divide && (chunks < 2 || !weighted_units_divide(model.layers, chunks, e, l)))
        continue;
      if (gives(w)) return w;
    }
  return std::nullopt;
}

std::string end_switch_note(const Stack& stack, const ModelSpec& model,
                            const std::vector<std::int64_t>& chunk_layers,
                            const std::vector<std::int64_t>& own, std::int64_t virtual_stages,
                            bool for_memory) {
  const auto& split = stack.pipeline_split;
  std::string how;
  if (const auto w = weights_giving(split, model, chunk_layers, virtual_stages)) {
    if (split.end_switches == EndSwitches::weights)
      how = fmt::format(
          "the ends weighed {} and {} layers (torchtitan's "
          "pipeline_parallel_first/last_stage_less_layers)",
          w->embedding_layers, w->loss_layers);
    else
      how = fmt::format("{} counted as a layer (Megatron-LM's --account-for-*-in-pipeline-split)",
                        w->embedding_layers > 0 && w->loss_layers > 0 ? "the embedding and the loss"
                        : w->embedding_layers > 0                     ? "the embedding"
                        : w->loss_layers > 0                          ? "the loss"
                                                                      : "neither end");
  } else {
    // A stage's layers are its chunks' (chunk g on stage g mod pp, all alike).
    const std::int64_t v = std::max<std::int64_t>(virtual_stages, 1);
    const auto pp = chunk_layers.size() / static_cast<std::size_t>(v);
    how = fmt::format(
        "the first and last stage's layers given (Megatron-LM's "
        "--decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {})",
        chunk_layers.front() * v, chunk_layers[pp - 1] * v);
  }
  return fmt::format(
      "layers split {} by the stack's end switches, {}, {}; stack '{}' splits them {} without "
      "the switches",
      fmt::join(chunk_layers, ", "), how,
      for_memory ? "to fit memory (the least busy split that does; the stack's own leaves a "
                   "stage over it)"
                 : "to balance the stages' estimated time",
      stack.name, fmt::join(own, ", "));
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
    const std::int64_t v = std::max<std::int64_t>(virtual_stages, 1), pp = chunks / v;
    if (s.embedding_layers + s.loss_layers == 0)
      if (const auto ends = uneven_ends_chunks(model.layers, chunks, v); !ends.empty())
        return fmt::format(
            "stack '{}' splits the layers evenly, and {} do not divide into {} pipeline {}, as "
            "they are or with the ends weighed: the first and last stage take {} and {}, the "
            "others {}{} (Megatron-LM's --decoder-first/last-pipeline-num-layers)",
            stack.name, model.layers, chunks, v > 1 ? "chunks" : "stages", ends.front() * v,
            ends[static_cast<std::size_t>(pp - 1)] * v, ends[1] * v,
            v > 1 ? ", each stage's layers spread evenly over its virtual stages" : "");
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
