#include "compute/kernel_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "compute/compute_model.hpp"
#include "compute/kernel_time.hpp"

namespace meshsim {
namespace {

std::string kind_of(const Kernel& k) {
  switch (k.kind) {
    case KernelKind::gemm:
      return "gemm";
    case KernelKind::attention:
      return is_decode(k.attention) ? "decode" : "attention";
    case KernelKind::memory_bound:
      return std::string(name_of(k.memory_class));
    case KernelKind::none:
      break;
  }
  return "none";
}

constexpr std::array<const char*, 5> kBands{"1–16", "17–128", "129–512", "513–2048", "2049+"};

}  // namespace

std::string token_band(std::int64_t t) {
  if (t <= 16) return kBands[0];
  if (t <= 128) return kBands[1];
  if (t <= 512) return kBands[2];
  if (t <= 2048) return kBands[3];
  return kBands[4];
}

std::map<std::string, MeasurementScatter> measurement_scatter(
    const std::vector<MeasuredKernel>& rows) {
  // Sweeps: the rows of one group, op and layer apart from the layer name's " T<tokens>".
  std::map<std::tuple<std::string, std::string, std::string, std::string>,
           std::vector<std::pair<std::int64_t, double>>>
      sweeps;
  for (const auto& r : rows) {
    const std::string suffix = " T" + std::to_string(r.tokens);
    if (r.tokens <= 0 || r.layer.size() <= suffix.size() ||
        r.layer.compare(r.layer.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    sweeps[{kind_of(r.kernel), r.group, r.op, r.layer.substr(0, r.layer.size() - suffix.size())}]
        .push_back({r.tokens, r.seconds});
  }
  std::map<std::string, std::vector<double>> errors;
  std::map<std::string, MeasurementScatter> out;
  for (auto& [key, points] : sweeps) {
    const auto& kind = std::get<0>(key);
    std::sort(points.begin(), points.end());
    for (std::size_t i = 1; i + 1 < points.size(); ++i) {
      const auto [t0, m0] = points[i - 1];
      const auto [t1, m1] = points[i];
      const auto [t2, m2] = points[i + 1];
      if (t2 == t0) continue;
      const double line =
          m0 + (m2 - m0) * static_cast<double>(t1 - t0) / static_cast<double>(t2 - t0);
      errors[kind].push_back(line / m1 - 1.0);
    }
    double slowest = 0;  // the slowest measurement at fewer tokens
    auto& s = out[kind];
    for (const auto& [tokens, m] : points) {
      if (slowest > m) s.monotone_max = std::max(s.monotone_max, (slowest - m) / (slowest + m));
      slowest = std::max(slowest, m);
    }
  }
  for (auto& [kind, e] : errors) out[kind].neighbours = error_stats(std::move(e));
  return out;
}

KernelValidation leave_one_group_out(const std::vector<MeasuredKernel>& rows, const GpuSpec& gpu,
                                     const KernelParams& base,
                                     const std::vector<std::string>& always_train,
                                     bool with_points) {
  KernelValidation v;
  v.gpu = gpu.model;
  v.with_points = with_points;
  v.scatter = measurement_scatter(rows);
  const KernelParams all = fit_kernel_params(rows, gpu, base).params;
  std::set<std::string> groups;
  for (const auto& r : rows)
    if (std::find(always_train.begin(), always_train.end(), r.group) == always_train.end())
      groups.insert(r.group);
  for (const auto& held : groups) {
    std::vector<MeasuredKernel> train;
    std::set<std::string> trained_kinds;
    for (const auto& r : rows)
      if (r.group != held) {
        train.push_back(r);
        trained_kinds.insert(kind_of(r.kernel));
      }
    const KernelParams fitted = fit_kernel_params(train, gpu, base).params;
    CalibrationProfile profile;
    profile.gpu = gpu.model;
    profile.file = "held out: " + held;
    profile.model = to_json(fitted);
    if (with_points)
      for (const auto& r : train)
        if (r.kernel.kind == KernelKind::gemm)
          profile.gemm.push_back({r.kernel.dtype, r.kernel.gemm, r.kernel.flops / r.seconds});
    const ComputeModel calibrated(gpu, profile);
    std::map<std::string, LayerCheck> layers;
    for (const auto& r : rows) {
      if (r.group != held) continue;
      KernelCheck c;
      c.group = r.group;
      c.op = r.op;
      c.layer = r.layer;
      c.kind = kind_of(r.kernel);
      c.tokens = r.tokens;
      c.measured_s = r.seconds;
      c.held_out = trained_kinds.contains(c.kind);
      c.predicted_s =
          c.held_out ? calibrated.seconds(r.kernel) : kernel_seconds(r.kernel, gpu, all);
      v.kernels.push_back(c);
      if (r.tokens > 0 && !r.layer.empty()) {
        auto& l = layers[r.layer];
        l.group = r.group;
        l.layer = r.layer;
        l.tokens = r.tokens;
        l.measured_s += c.measured_s;
        l.predicted_s += c.predicted_s;
      }
    }
    for (auto& [name, l] : layers) v.layers.push_back(l);
  }
  return v;
}

std::string kernel_validation_markdown(const std::vector<KernelValidation>& runs,
                                       const std::string& preamble) {
  std::string md = preamble;
  const auto row = [](const std::string& what, const ErrorStats& s) {
    return fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.1f} |\n", what, s.count, 100 * s.median,
                       100 * s.p95, 100 * s.max);
  };
  const std::string head =
      "| | count | median \\|error\\| % | p95 % | max % |\n|---|---:|---:|---:|---:|\n";
  for (const auto& v : runs) {
    md += fmt::format("\n## {}, {}\n\n### By kernel class (held-out models)\n\n", v.gpu,
                      v.with_points ? "fitted parameters and the other models' measured GEMMs"
                                    : "fitted parameters alone (as the bundled profiles)");
    std::map<std::string, std::vector<double>> by_kind, by_kind_band, in_sample;
    std::vector<double> memory;
    for (const auto& c : v.kernels) {
      (c.held_out ? by_kind : in_sample)[c.kind].push_back(c.error());
      if (c.held_out && c.tokens > 0)
        by_kind_band[c.kind + " " + token_band(c.tokens)].push_back(c.error());
      if (c.held_out && c.kind != "gemm" && c.kind != "attention" && c.kind != "decode")
        memory.push_back(c.error());
    }
    md += head;
    for (const auto& [k, e] : by_kind) md += row(k, error_stats(e));
    if (!memory.empty()) md += row("all memory-bound", error_stats(memory));
    std::vector<double> layer_errors;
    std::map<std::string, std::vector<double>> layer_band, layer_group;
    for (const auto& l : v.layers) {
      layer_errors.push_back(l.error());
      layer_band[token_band(l.tokens)].push_back(l.error());
      layer_group[l.group].push_back(l.error());
    }
    if (!layer_errors.empty()) md += row("layer sum", error_stats(layer_errors));
    if (!in_sample.empty()) {
      md += "\nIn-sample (only one model measures these; fitted to all of it):\n\n" + head;
      for (const auto& [k, e] : in_sample) md += row(k, error_stats(e));
    }
    md += "\n### By kernel class and tokens (held-out models)\n\n" + head;
    for (const auto& [k, e] : by_kind)
      for (const char* b : kBands)
        if (auto it = by_kind_band.find(k + " " + b); it != by_kind_band.end())
          md += row(k + ", " + b + " tokens", error_stats(it->second));
    for (const char* b : kBands)
      if (auto it = layer_band.find(b); it != layer_band.end())
        md += row(std::string("layer sum, ") + b + " tokens", error_stats(it->second));
    md += "\n### Layer sum by held-out model\n\n" + head;
    for (const auto& [g, e] : layer_group) md += row(g, error_stats(e));
    if (v.with_points || v.scatter.empty()) continue;
    md +=
        "\n### Scatter of the measurements themselves\n\n"
        "Each measurement against the straight line through its two neighbours in the same token "
        "sweep (what interpolating the held-out model's own measurements would give), and the "
        "least max |error| a model whose time never falls as tokens grow can have on these "
        "sweeps (a pair measured slower at fewer tokens). Neither is a target; they say how much "
        "of the errors above the measurements' own scatter explains.\n\n"
        "| | count | median \\|error\\| % | p95 % | max % | monotone model's max at least % |\n"
        "|---|---:|---:|---:|---:|---:|\n";
    for (const auto& [k, s] : v.scatter)
      md += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} |\n", k, s.neighbours.count,
                        100 * s.neighbours.median, 100 * s.neighbours.p95, 100 * s.neighbours.max,
                        100 * s.monotone_max);
  }
  return md;
}

}  // namespace meshsim
