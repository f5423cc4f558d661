#include "report/kineto_report.hpp"

#include <fmt/format.h>

#include "core/enum_names.hpp"
#include "report/metrics_json.hpp"

namespace meshsim {

std::vector<KinetoPart> kineto_parts(const KinetoComparison& c) {
  const KinetoSummary& m = *c.measured;
  const TrainingResult& r = *c.simulated;
  double compute = 0;
  std::map<std::string, double> comm;
  for (std::size_t i = 0; i < r.trace.info.size(); ++i) {
    const auto& info = r.trace.info[i];
    if (info.rank != 0 || info.host) continue;
    const auto& t = r.replay.ops[i];
    if (!t.finished()) continue;
    const double d = (t.end - t.start).seconds();
    if (info.comm)
      comm[std::string(info.kind)] += d;
    else
      compute += d;
  }
  std::vector<KinetoPart> parts;
  if (m.step_s > 0) parts.push_back({"step (wall)", m.step_s, r.step_time_s});
  parts.push_back({"compute kernels", m.compute_s(), compute});
  // The simulation prices kernels, not the profiler's kinds: no split of its compute.
  parts.push_back({"  gemm", m.gemm_s, {}});
  parts.push_back({"  attention", m.attention_s, {}});
  parts.push_back({"  other", m.other_compute_s, {}});
  for (const auto& [op, s] : m.comm_s) {
    const auto it = comm.find(op);
    parts.push_back(
        {"nccl " + op, s, it == comm.end() ? std::optional<double>{} : std::optional{it->second}});
  }
  for (const auto& [op, s] : comm)
    if (!m.comm_s.contains(op)) parts.push_back({"nccl " + op, 0, s});
  return parts;
}

namespace {

// The relative error of a part, where both sides have it.
std::optional<double> part_error(const KinetoPart& p) {
  if (!p.simulated_s || p.measured_s <= 0) return std::nullopt;
  return (*p.simulated_s - p.measured_s) / p.measured_s;
}

// A measured GEMM's kernel time from its rate.
double gemm_measured_s(const GemmPoint& p) {
  return gemm_kernel(p.shape, p.dtype).flops / p.flops_per_s;
}

}  // namespace

std::string kineto_text(const KinetoComparison& c) {
  const KinetoSummary& m = *c.measured;
  std::string out = fmt::format("# {}: device {}, {} kernels, {} profiled step(s)\n", c.trace,
                                m.device, m.kernels, m.steps);
  out += fmt::format("# simulated: meshsim train of the same job on {} ({})\n", c.cluster,
                     to_string(c.mesh));
  out +=
      fmt::format("{:<20} {:>12} {:>12} {:>8}\n", "per step", "measured s", "simulated s", "error");
  for (const auto& p : kineto_parts(c)) {
    const auto sim =
        p.simulated_s ? fmt::format("{:>12.4f}", *p.simulated_s) : fmt::format("{:>12}", "-");
    const auto err = part_error(p);
    out += fmt::format("{:<20} {:>12.4f} {} {}\n", p.part, p.measured_s, sim,
                       err ? fmt::format("{:+7.1f}%", 100 * *err) : std::string("       -"));
  }
  if (!m.gemm_points.empty()) {
    out += fmt::format("# {} GEMM shapes with kernel times (aten::mm/addmm/bmm)\n",
                       m.gemm_points.size());
    for (const auto& p : m.gemm_points) {
      const double measured = gemm_measured_s(p);
      const double model = c.kernels->seconds(gemm_kernel(p.shape, p.dtype));
      out += fmt::format(
          "  {} {}x{}x{} batch {}: {:.1f} us, {:.1f} TFLOP/s model {:.1f} us ({:+.1f}%)\n",
          name_of(p.dtype), p.shape.m, p.shape.n, p.shape.k, p.shape.batch, measured * 1e6,
          p.flops_per_s / 1e12, model * 1e6, 100 * (model - measured) / measured);
    }
  }
  if (m.host_per_kernel_s)
    out += fmt::format(
        "# host: {:.2f} µs per kernel launched (median of {} launch-to-launch gaps; a launch call "
        "takes {:.2f} µs)\n",
        *m.host_per_kernel_s * 1e6, m.launch_gaps, m.launch_call_s * 1e6);
  else
    out += fmt::format(
        "# host: not measured ({} launch-to-launch gaps; profile with ProfilerActivity.CPU)\n",
        m.launch_gaps);
  return out;
}

Json kineto_json(const KinetoComparison& c) {
  const KinetoSummary& m = *c.measured;
  Json doc{{"trace", c.trace}, {"device", m.device}, {"kernels", m.kernels}, {"steps", m.steps}};
  doc["simulated"] = {{"topology", c.cluster}, {"mesh", mesh_json(c.mesh)}};
  Json parts = Json::array();
  for (const auto& p : kineto_parts(c)) {
    Json j{{"part", p.part}, {"measured_s", p.measured_s}};
    if (p.simulated_s) j["simulated_s"] = *p.simulated_s;
    if (const auto err = part_error(p)) j["error"] = *err;
    parts.push_back(std::move(j));
  }
  doc["parts"] = std::move(parts);
  Json gemms = Json::array();
  for (const auto& p : m.gemm_points)
    gemms.push_back({{"dtype", name_of(p.dtype)},
                     {"m", p.shape.m},
                     {"n", p.shape.n},
                     {"k", p.shape.k},
                     {"batch", p.shape.batch},
                     {"measured_s", gemm_measured_s(p)},
                     {"flops_per_s", p.flops_per_s},
                     {"model_s", c.kernels->seconds(gemm_kernel(p.shape, p.dtype))}});
  doc["gemm"] = std::move(gemms);
  if (m.host_per_kernel_s) {
    doc["host_per_kernel_s"] = *m.host_per_kernel_s;
    doc["launch_call_s"] = m.launch_call_s;
  }
  return doc;
}

}  // namespace meshsim
