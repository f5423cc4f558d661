#include "compute/calibration_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "compute/bundled_profiles.hpp"
#include "compute/kernel_time.hpp"
#include "core/enum_names.hpp"
#include "core/median.hpp"
#include "network/nccl_tests_log.hpp"

namespace meshsim {
namespace {

DType dtype_at(const JsonRef& ref) {
  const auto s = ref.string();
  if (auto d = parse_dtype(s)) return *d;
  ref.fail("unknown dtype '" + s + "' (known: " + joined_names(kAllDTypes) + ")");
}

std::string fmt_regimes(const std::vector<AlphaBetaRegime>& regimes) {
  std::string s;
  for (const auto& r : regimes)
    s += fmt::format("{}[{} B..] α {:.2f} µs β {:.1f} GB/s (max err {:.1f} %)",
                     s.empty() ? "" : "; ", r.min_bytes, r.alpha_s * 1e6, r.bandwidth_Bps / 1e9,
                     100 * r.max_relative_error);
  return s;
}

// A GEMM timed alone and beside a kernel holding `held` of the GPU's `sms` SMs (the harness's
// `interference` section), planned by cuBLASLt for `planned_for` SMs.
struct InterferenceRow {
  GemmShape shape;
  std::int64_t sms = 0, held = 0, planned_for = 0;
  double alone_s = 0, beside_s = 0;
};

InterferenceRow read_interference_row(const JsonRef& e) {
  ObjectReader r(e);
  InterferenceRow row;
  const auto dt = r.required("dtype");
  if (const auto d = dtype_at(dt); d == DType::fp8 || d == DType::fp32)
    dt.fail("expected a 16-bit dtype (bf16 or fp16)");
  row.shape.m = r.required("m").positive_integer();
  row.shape.n = r.required("n").positive_integer();
  row.shape.k = r.required("k").positive_integer();
  const auto sms = r.required("sms");
  row.sms = sms.positive_integer();
  if (row.sms > 100000) sms.fail("must be at most 100000");
  const auto held = r.required("held_sms");
  row.held = held.positive_integer();
  if (row.held >= row.sms) held.fail("must be fewer than sms");
  const auto planned = r.required("planned_for");
  row.planned_for = planned.positive_integer();
  if (row.planned_for != row.sms && row.planned_for != row.sms - row.held)
    planned.fail("must be sms or sms − held_sms");
  row.alone_s = r.required("alone_us").positive_number() * 1e-6;
  row.beside_s = r.required("beside_us").positive_number() * 1e-6;
  r.finish();
  return row;
}

// The harness's `launch` rows: kernels of `kernel_us` back to back in one stream (`eager`:
// launched one by one; `graph`: one CUDA graph), or the host's CPU time per launch (`host`).
struct LaunchRows {
  std::vector<double> eager_gap_s, graph_gap_s, host_s;
};

void read_launch_row(const JsonRef& e, LaunchRows& rows) {
  ObjectReader r(e);
  const auto mode = r.required("mode");
  const auto m = mode.string();
  if (m != "eager" && m != "graph" && m != "host") mode.fail("expected 'eager', 'graph' or 'host'");
  (void)r.required("kernels").positive_integer();
  if (m == "host") {
    rows.host_s.push_back(r.required("per_launch_us").positive_number() * 1e-6);
  } else {
    const double kernel = r.required("kernel_us").positive_number();
    const auto per = r.required("per_kernel_us");
    const double per_kernel = per.positive_number();
    // The kernels of one stream cannot overlap: each takes at least its own length.
    if (per_kernel < kernel)
      per.fail("must be at least kernel_us (kernels in one stream run one after another)");
    (m == "eager" ? rows.eager_gap_s : rows.graph_gap_s).push_back((per_kernel - kernel) * 1e-6);
  }
  r.finish();
}

// Optional labels of a measured row: what it was measured on, which layer, which op.
void read_tags(ObjectReader& r, MeasuredKernel& mk) {
  if (auto v = r.optional("group")) mk.group = v->string();
  if (auto v = r.optional("layer")) mk.layer = v->string();
  if (auto v = r.optional("op")) mk.op = v->string();
  if (auto v = r.optional("tokens")) mk.tokens = v->positive_integer();
}

}  // namespace

std::string catalogue_gpu_name(const std::string& device_name) {
  const auto has = [&](const char* s) { return device_name.find(s) != std::string::npos; };
  if (has("H200")) return "H200-SXM-141GB";
  if (has("H100") && has("PCIe")) return "H100-PCIe-80GB";
  if (has("H100")) return "H100-SXM5-80GB";
  if (has("A100") && has("40GB")) return "A100-SXM4-40GB";
  if (has("A100")) return "A100-SXM4-80GB";
  if (has("GB200")) return "GB200-186GB";
  if (has("B200")) return "B200-SXM-180GB";
  if (has("L40S")) return "L40S-48GB";
  return "";
}

FitResult fit_calibration(const JsonRef& raw, const FitOptions& options) {
  FitResult out;
  auto& p = out.profile;
  ObjectReader r(raw);
  const auto harness = r.required("harness").string();
  std::string device;
  if (auto env = r.optional("environment")) {
    // Free-form: driver, CUDA, NCCL versions, clocks, GPUs; only the first GPU's name is used.
    if (!env->raw().is_object()) env->fail("must be an object");
    const auto& e = env->raw();
    if (e.contains("gpus") && e["gpus"].is_array() && !e["gpus"].empty() &&
        e["gpus"][0].is_object() && e["gpus"][0].contains("name") &&
        e["gpus"][0]["name"].is_string())
      device = e["gpus"][0]["name"].get<std::string>();
  }
  if (auto n = r.optional("notes"))
    for (const auto& e : n->array()) (void)e.string();
  p.gpu = options.gpu.empty() ? catalogue_gpu_name(device) : options.gpu;
  if (p.gpu.empty())
    r.self().fail("cannot tell the GPU model from environment.gpus[0].name ('" + device +
                  "'); give it with --gpu");
  p.source = fmt::format("fitted by meshsim calibrate fit from {} ({}; device '{}')", raw.file(),
                         harness, device);

  if (auto g = r.optional("gemm")) {
    std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
             std::vector<double>>
        rates;
    for (const auto& e : g->array()) {
      ObjectReader gr(e);
      const auto dt = dtype_at(gr.required("dtype"));
      GemmShape s;
      s.m = gr.required("m").positive_integer();
      s.n = gr.required("n").positive_integer();
      s.k = gr.required("k").positive_integer();
      if (auto b = gr.optional("batch")) s.batch = b->positive_integer();
      const double t = gr.required("time_us").positive_number() * 1e-6;
      if (auto v = gr.optional("tflops")) (void)v->non_negative_number();
      MeasuredKernel mk{gemm_kernel(s, dt), t, {}, {}, {}, 0};
      read_tags(gr, mk);
      gr.finish();
      rates[{static_cast<int>(dt), s.m, s.n, s.k, s.batch}].push_back(mk.kernel.flops / t);
      out.measured.push_back(std::move(mk));
    }
    for (const auto& [key, v] : rates) {
      GemmPoint pt;
      pt.dtype = static_cast<DType>(std::get<0>(key));
      pt.shape = GemmShape{std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)};
      pt.flops_per_s = median_of(v);
      p.gemm.push_back(pt);
    }
    out.lines.push_back(fmt::format("gemm: {} shapes", p.gemm.size()));
  }
  if (auto a = r.optional("attention")) {
    std::size_t skipped = 0;
    for (const auto& e : a->array()) {
      ObjectReader ar(e);
      AttentionPoint pt;
      pt.dtype = dtype_at(ar.required("dtype"));
      auto& s = pt.shape;
      s.batch = ar.required("batch").positive_integer();
      s.seq_q = ar.required("seq_q").positive_integer();
      s.seq_kv = s.seq_q;
      if (auto v = ar.optional("seq_kv")) s.seq_kv = v->positive_integer();
      s.heads = ar.required("heads").positive_integer();
      s.kv_heads = s.heads;
      if (auto v = ar.optional("kv_heads")) s.kv_heads = v->positive_integer();
      s.head_dim = ar.required("head_dim").positive_integer();
      s.causal = ar.required("causal").boolean();
      const auto dir = ar.required("direction");
      if (dir.string() != "forward" && dir.string() != "backward")
        dir.fail("expected 'forward' or 'backward'");
      s.backward = dir.string() == "backward";
      const double t = ar.required("time_us").positive_number() * 1e-6;
      if (auto v = ar.optional("tflops")) (void)v->non_negative_number();
      bool fused = true;
      if (auto v = ar.optional("implementation")) fused = v->string() != "unfused";
      MeasuredKernel mk{attention_kernel(s, pt.dtype), t, {}, {}, {}, 0};
      read_tags(ar, mk);
      ar.finish();
      if (!fused && !options.include_unfused_attention) {
        ++skipped;
        continue;
      }
      pt.flops_per_s = mk.kernel.flops / t;
      p.attention.push_back(pt);
      out.measured.push_back(std::move(mk));
    }
    out.lines.push_back(
        fmt::format("attention: {} shapes{}", p.attention.size(),
                    skipped ? fmt::format(" ({} unfused rows left out)", skipped) : ""));
  }
  if (auto m = r.optional("memory_ops")) {
    for (const auto& e : m->array()) {
      ObjectReader mr(e);
      const auto cls = mr.required("class");
      const auto c = parse_memory_class(cls.string());
      if (!c)
        cls.fail("unknown kernel class '" + cls.string() +
                 "' (known: " + joined_names(kAllMemoryClasses) + ")");
      const double bytes = mr.required("bytes").positive_number();
      const double t = mr.required("time_us").positive_number() * 1e-6;
      MeasuredKernel mk{memory_kernel(*c, bytes), t, {}, {}, {}, 0};
      read_tags(mr, mk);
      mr.finish();
      out.measured.push_back(std::move(mk));
    }
    out.lines.push_back(fmt::format("memory-bound kernels: {} measured", m->array().size()));
  }
  if (auto m = r.optional("membw")) {
    std::vector<AlphaBetaPoint> pts;
    for (const auto& e : m->array()) {
      ObjectReader mr(e);
      const auto kind = mr.required("kind");
      if (kind.string() != "copy" && kind.string() != "triad")
        kind.fail("expected 'copy' or 'triad'");
      const double bytes = mr.required("bytes").positive_number();
      const double t = mr.required("time_us").positive_number() * 1e-6;
      if (auto v = mr.optional("GBps")) (void)v->non_negative_number();
      mr.finish();
      pts.push_back({bytes, t});
    }
    if (!pts.empty()) {
      const auto fit = fit_alpha_beta(pts);
      p.memory_bandwidth_Bps = fit.bandwidth_Bps;
      p.launch_overhead = Time::from_seconds_ceil(fit.alpha_s);
      out.lines.push_back(fmt::format(
          "memory: {:.0f} GB/s streaming, {:.2f} µs per kernel ({} points, max err {:.1f} %)",
          fit.bandwidth_Bps / 1e9, fit.alpha_s * 1e6, fit.points, 100 * fit.max_relative_error));
    }
  }
  if (auto p2p = r.optional("p2p")) {
    std::map<LinkKind, std::vector<AlphaBetaPoint>> by_class;
    for (const auto& e : p2p->array()) {
      ObjectReader pr(e);
      (void)pr.required("src").integer();
      (void)pr.required("dst").integer();
      const auto link = pr.required("link");
      const auto kind = parse_link_kind(link.string());
      if (!kind) link.fail("unknown link class '" + link.string() + "'");
      const double bytes = pr.required("bytes").positive_number();
      const double t = pr.required("time_us").positive_number() * 1e-6;
      if (auto v = pr.optional("GBps")) (void)v->non_negative_number();
      pr.finish();
      by_class[*kind].push_back({bytes, t});
    }
    for (auto& [kind, pts] : by_class) {
      P2pCalibration c;
      c.kind = kind;
      c.regimes = fit_regimes(pts);
      out.lines.push_back(fmt::format("p2p {}: {}", name_of(kind), fmt_regimes(c.regimes)));
      p.links.p2p.push_back(std::move(c));
    }
  }
  if (auto nccl = r.optional("nccl")) {
    std::map<std::tuple<int, std::int32_t, std::int32_t>, std::vector<AlphaBetaPoint>> by_call;
    for (const auto& e : nccl->array()) {
      ObjectReader nr(e);
      const auto op = nr.required("op");
      const auto parsed = parse_collective_op(op.string());
      if (!parsed) op.fail("unknown collective '" + op.string() + "'");
      const auto ranks = static_cast<std::int32_t>(nr.required("ranks").positive_integer());
      std::int32_t nodes = 1;
      if (auto v = nr.optional("nodes")) nodes = static_cast<std::int32_t>(v->positive_integer());
      const double bytes = nr.required("bytes").positive_number();
      const double t = nr.required("time_us").positive_number() * 1e-6;
      for (const char* k : {"algbw_GBps", "busbw_GBps"})
        if (auto v = nr.optional(k)) (void)v->non_negative_number();
      nr.finish();
      by_call[{static_cast<int>(*parsed), ranks, nodes}].push_back({bytes, t});
    }
    for (auto& [key, pts] : by_call) {
      CollectiveCalibration c;
      c.op = static_cast<CollectiveOp>(std::get<0>(key));
      c.ranks = std::get<1>(key);
      c.nodes = std::get<2>(key);
      c.regimes = fit_regimes(pts);
      out.lines.push_back(fmt::format("{} on {} ranks, {} node(s): {}", name_of(c.op), c.ranks,
                                      c.nodes, fmt_regimes(c.regimes)));
      p.links.collectives.push_back(std::move(c));
    }
  }
  std::vector<InterferenceRow> interference;
  if (auto v = r.optional("interference"))
    for (const auto& e : v->array()) interference.push_back(read_interference_row(e));
  LaunchRows launch;
  if (auto v = r.optional("launch"))
    for (const auto& e : v->array()) read_launch_row(e, launch);
  if (auto t = r.optional("topology"))
    if (!t->raw().is_object()) t->fail("must be a meshsim topology object");
  r.finish();
  // The median over the measured kernel lengths (the gap should not depend on them).
  const auto median_if = [](const std::vector<double>& v) {
    return v.empty() ? std::optional<double>{} : std::optional<double>{median_of(v)};
  };
  p.kernel_gap_s = median_if(launch.eager_gap_s);
  p.graph_kernel_gap_s = median_if(launch.graph_gap_s);
  p.host_launch_s = median_if(launch.host_s);
  if (p.kernel_gap_s || p.graph_kernel_gap_s || p.host_launch_s) {
    const auto us = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.2f} µs", *v * 1e6) : std::string("not measured");
    };
    out.lines.push_back(fmt::format(
        "launch: {} between kernels launched one by one, {} in a CUDA graph; host {} per launch "
        "(rows: {})",
        us(p.kernel_gap_s), us(p.graph_kernel_gap_s), us(p.host_launch_s),
        launch.eager_gap_s.size() + launch.graph_gap_s.size() + launch.host_s.size()));
  }
  const auto catalogue_gpu = [&] {
    const auto gpu = find_gpu(p.gpu);
    if (!gpu) r.self().fail("GPU '" + p.gpu + "' is not in the catalogue; give it with --gpu");
    return *gpu;
  };
  std::optional<KernelParams> fitted;
  if (!out.measured.empty() && options.fit_model) {
    const auto gpu = catalogue_gpu();
    auto fit = fit_kernel_params(out.measured, gpu,
                                 options.base ? *options.base : bundled_kernel_params(gpu));
    p.model = options.base_model ? *options.base_model : Json::object();
    p.model->merge_patch(fit.model);
    for (auto& l : fit.lines) out.lines.push_back("model " + l);
    fitted = fit.params;
  }
  if (!interference.empty()) {
    // Which launch model predicts the measured slowdowns of the GEMMs cuBLASLt planned for the
    // whole GPU: a grid for every SM running on those left, or a plan for the SMs left.
    auto gpu = catalogue_gpu();
    const KernelParams params = fitted         ? *fitted
                                : options.base ? *options.base
                                               : bundled_kernel_params(gpu);
    double err_all = 0, err_left = 0;
    int whole = 0;
    for (const auto& row : interference) {
      gpu.sm_count = static_cast<std::int32_t>(row.sms);
      const auto k = gemm_kernel(row.shape, DType::bf16);
      const double alone = kernel_seconds(k, gpu, params);
      const auto held = static_cast<std::int32_t>(row.held);
      const double measured = row.beside_s / row.alone_s;
      const auto shape = fmt::format("{}×{}×{}, {} of {} SMs held", row.shape.m, row.shape.n,
                                     row.shape.k, row.held, row.sms);
      if (row.planned_for == row.sms) {
        const double all = kernel_seconds(k, gpu, params, {held, true}) / alone;
        const double left = kernel_seconds(k, gpu, params, {held, false}) / alone;
        err_all += std::abs(std::log(measured / all));
        err_left += std::abs(std::log(measured / left));
        ++whole;
        out.lines.push_back(fmt::format(
            "interference: {}: measured {:.2f}×; model {:.2f}× launched for all SMs, {:.2f}× "
            "planned for the SMs left",
            shape, measured, all, left));
      } else {
        out.lines.push_back(fmt::format(
            "interference: {}, planned for the {} left: measured {:.2f}× of the same plan alone "
            "(model 1.00×: it runs on the SMs it was planned for)",
            shape, row.planned_for, measured));
      }
    }
    if (whole > 0) {
      p.gemm_launched_for_all_sms = err_all <= err_left;
      out.lines.push_back(fmt::format(
          "interference: GEMMs beside a collective priced as {} (mean |log error| {:.3f} "
          "launched for all SMs, {:.3f} planned for the SMs left; rows: {})",
          *p.gemm_launched_for_all_sms ? kLaunchedForAllSms : kPlannedForSmsLeft, err_all / whole,
          err_left / whole, whole));
    }
  }
  if (!options.keep_points) {
    p.gemm.clear();
    p.attention.clear();
  }
  return out;
}

std::string add_collective_fit(LinkCalibration& links, const NcclTestsLog& log) {
  std::vector<AlphaBetaPoint> pts;
  for (const auto& row : log.rows) pts.push_back({row.bytes, row.time_us * 1e-6});
  CollectiveCalibration c;
  c.op = log.op;
  c.ranks = log.ranks;
  c.nodes = log.nodes;
  c.regimes = fit_regimes(pts);
  std::erase_if(links.collectives, [&](const CollectiveCalibration& x) {
    return x.op == c.op && x.ranks == c.ranks && x.nodes == c.nodes;
  });
  const auto line = fmt::format("{} on {} ranks, {} node(s) from {}: {}", name_of(c.op), c.ranks,
                                c.nodes, log.file, fmt_regimes(c.regimes));
  links.collectives.push_back(std::move(c));
  return line;
}

}  // namespace meshsim
