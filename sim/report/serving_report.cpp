#include "report/serving_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/html_escape.hpp"

namespace meshsim {
namespace {

constexpr double kW = 640, kH = 220, kLeft = 60, kBottom = 34, kTop = 10, kRight = 16;

// A line chart of (x, y) series on linear axes from 0, with the axes labelled.
std::string line_chart(
    const std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>& series,
    const std::string& x_label, const std::string& y_label, double y_max, double x_marker = -1) {
  double x_max = 0;
  for (const auto& [name, pts] : series)
    for (const auto& p : pts) x_max = std::max(x_max, p.first);
  if (x_max <= 0) x_max = 1;
  if (y_max <= 0) y_max = 1;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  const auto X = [&](double x) { return kLeft + pw * x / x_max; };
  const auto Y = [&](double y) { return kTop + ph * (1 - y / y_max); };
  static const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f"};
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">",
      kW, kH);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#444\"/>", kLeft,
                   kTop, kTop + ph);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#444\"/>", kLeft,
                   kTop + ph, kLeft + pw);
  for (int i = 0; i <= 4; ++i) {
    const double xv = x_max * i / 4, yv = y_max * i / 4;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3g}</text>", X(xv),
                     kTop + ph + 14, xv);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>", kLeft - 4,
                     Y(yv) + 4, yv);
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                   kLeft + pw / 2, kH - 4, html_escape(x_label));
  s += fmt::format(
      "<text x=\"12\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1f})\">{}"
      "</text>",
      kTop + ph / 2, kTop + ph / 2, html_escape(y_label));
  if (x_marker >= 0 && x_marker <= x_max)
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#c00\" "
        "stroke-dasharray=\"4 3\"/>",
        X(x_marker), kTop, kTop + ph);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& [name, pts] = series[i];
    std::string d;
    for (const auto& p : pts) d += fmt::format("{:.1f},{:.1f} ", X(p.first), Y(p.second));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
                     kColors[i % 4], d);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">{}</text>", kLeft + pw - 150,
                     kTop + 14 + 14.0 * static_cast<double>(i), kColors[i % 4], html_escape(name));
  }
  return s + "</svg>\n";
}

// Empirical CDF of sorted samples, thinned to at most ~400 points.
std::vector<std::pair<double, double>> cdf(const std::vector<double>& sorted) {
  std::vector<std::pair<double, double>> pts;
  const std::size_t n = sorted.size();
  if (n == 0) return pts;
  const std::size_t step = std::max<std::size_t>(1, n / 400);
  for (std::size_t i = 0; i < n; i += step)
    pts.emplace_back(sorted[i], static_cast<double>(i + 1) / static_cast<double>(n));
  pts.emplace_back(sorted.back(), 1.0);
  return pts;
}

std::string row(const std::string& k, const LatencySummary& s, double scale,
                const std::string& unit) {
  return fmt::format(
      "<tr><th>{}</th><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{}</td></tr>",
      k, s.mean * scale, s.p50 * scale, s.p90 * scale, s.p99 * scale, unit);
}

}  // namespace

void write_serving_trace(const ServingResult& r, std::ostream& out) {
  // Whole nanoseconds, written as microseconds: a stage's next iteration, starting when the last
  // ended, never overlaps it by a rounding (issue 18: 7,988 of 37,809 slices did).
  auto ns = [](double s) { return std::llround(s * 1e9); };
  auto us = [](long long v) { return fmt::format("{}.{:03}", v / 1000, v % 1000); };
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  const auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  std::int32_t replicas = 0, stages = 0;
  for (const auto& it : r.iteration_log) {
    replicas = std::max(replicas, it.replica + 1);
    stages = std::max(stages, it.stage + 1);
  }
  for (std::int32_t p = 0; p < replicas; ++p) {
    sep();
    out << fmt::format(
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":\"replica "
        "{}\"}}}}",
        p, p);
    for (std::int32_t s = 0; s < stages; ++s) {
      sep();
      out << fmt::format(
          "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
          "\"stage {}\"}}}}",
          p, s, s);
    }
  }
  for (const auto& it : r.iteration_log) {
    // Named by what the iteration runs, so Perfetto can aggregate them.
    const char* kind = it.decodes == 0 ? "prefill" : it.prefill_tokens == 0 ? "decode" : "mixed";
    const auto start = ns(it.start_s);
    sep();
    out << fmt::format(
        "{{\"name\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},"
        "\"args\":{{\"stage\":{},\"prefill_tokens\":{},\"decodes\":{}}}}}",
        kind, it.replica, it.stage, us(start), us(ns(it.end_s) - start), it.stage,
        it.prefill_tokens, it.decodes);
    // The replica's own KV use, a counter on its process (from its last stage's iterations).
    if (it.stage == stages - 1) {
      sep();
      out << fmt::format(
          "{{\"name\":\"kv_used\",\"ph\":\"C\",\"pid\":{},\"ts\":{},\"args\":{{\"fraction\":"
          "{:.4f}}}}}",
          it.replica, us(ns(it.end_s)), it.kv_used);
    }
  }
  // Each request as an async slice on its replica (queued → first token → finished).
  for (const auto& q : r.request_log) {
    if (q.replica < 0) continue;
    const auto id = fmt::format("\"cat\":\"request\",\"id\":{},\"pid\":{}", q.id, q.replica);
    sep();
    out << fmt::format(
        "{{\"name\":\"request\",\"ph\":\"b\",{},\"ts\":{},\"args\":{{\"prompt\":{},"
        "\"output\":{}}}}}",
        id, us(ns(q.arrival_s)), q.prompt, q.output);
    sep();
    out << fmt::format("{{\"name\":\"first token\",\"ph\":\"n\",{},\"ts\":{}}}", id,
                       us(ns(q.first_token_s)));
    sep();
    out << fmt::format("{{\"name\":\"request\",\"ph\":\"e\",{},\"ts\":{}}}", id,
                       us(ns(q.finished_s)));
  }
  out << "\n]}\n";
}

std::string render_serving_html(const ServingReport& rep) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<title>" + html_escape(rep.title) + "</title>";
  h += "<style>body{font-family:sans-serif;margin:24px;max-width:1040px}h2{margin-top:28px}"
       "pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}</style></head><body>\n";
  h += "<h1>" + html_escape(rep.title) + "</h1>\n";
  h += "<p>Command:</p><pre>" + html_escape(rep.command) + "</pre>\n";
  h += fmt::format("<p>Cluster {} ({}); layout {}; traffic {}.</p>\n", html_escape(rep.cluster),
                   html_escape(rep.gpu), html_escape(rep.layout), html_escape(rep.traffic));
  if (rep.search) {
    h += "<h2>Layouts compared</h2><p>" + html_escape(rep.search->verdict) +
         "</p><table><tr><th>#</th><th>layout</th><th>SLO</th><th>goodput req/s</th><th>TTFT "
         "p99 s</th><th>TPOT p99 ms</th><th>E2E mean s</th><th>tokens/s/GPU</th></tr>\n";
    int i = 0;
    for (const auto& c : rep.search->candidates) {
      ++i;
      if (!c.refused.empty()) {
        h += fmt::format("<tr><td>{}</td><td>{} × tp={} pp={}</td><td colspan=\"6\">{}</td></tr>",
                         i, c.replicas, c.shape.tp, c.shape.pp, html_escape(c.refused));
        continue;
      }
      const auto& x = c.result;
      h += fmt::format(
          "<tr><td>{}</td><td>{} × tp={} pp={}</td><td>{}</td><td>{:.2f}</td><td>{:.3f}</td>"
          "<td>{:.1f}</td><td>{:.3f}</td><td>{:.0f}</td></tr>\n",
          i, c.replicas, c.shape.tp, c.shape.pp, c.meets_slo ? "met" : "missed",
          x.goodput_requests_per_s, x.ttft.p99, 1e3 * x.tpot.p99, x.e2e.mean,
          x.tokens_per_s_per_gpu);
    }
    h += "</table>\n";
  }
  if (rep.result) {
    const auto& r = *rep.result;
    h += "<h2>Latency</h2><table><tr><th></th><th>mean</th><th>p50</th><th>p90</th><th>p99</th>"
         "<th>unit</th></tr>\n";
    h += row("TTFT", r.ttft, 1, "s") + row("TPOT", r.tpot, 1e3, "ms") +
         row("ITL", r.itl, 1e3, "ms") + row("E2E", r.e2e, 1, "s") +
         row("scheduling delay", r.scheduling_delay, 1, "s");
    h += "</table>\n";
    h += fmt::format(
        "<p>{} requests completed ({} rejected) in {:.2f} s: {:.2f} req/s, {:.0f} output "
        "tokens/s ({:.0f} per GPU); goodput {:.2f} req/s; {} preemptions.</p>\n",
        r.completed, r.rejected, r.makespan_s, r.requests_per_s, r.output_tokens_per_s,
        r.tokens_per_s_per_gpu, r.goodput_requests_per_s, r.preemptions);
    h += "<h2>Latency CDFs</h2><p>Fraction of requests at or below a latency; the dashed line "
         "is the SLO.</p>\n";
    h += line_chart({{"TTFT", cdf(r.ttft_samples)}}, "TTFT (s)", "fraction", 1.0,
                    rep.slo_ttft_s > 0 ? rep.slo_ttft_s : -1);
    std::vector<double> tpot_ms;
    for (double v : r.tpot_samples) tpot_ms.push_back(v * 1e3);
    h += line_chart({{"TPOT", cdf(tpot_ms)}}, "TPOT (ms)", "fraction", 1.0,
                    rep.slo_tpot_s > 0 ? rep.slo_tpot_s * 1e3 : -1);
    h += line_chart({{"E2E", cdf(r.e2e_samples)}}, "end-to-end latency (s)", "fraction", 1.0);
    h += fmt::format(
        "<h2>KV cache</h2><p>{} blocks of {} tokens per replica ({} tokens); utilisation mean "
        "{:.1f} %, peak {:.1f} %.</p>\n",
        r.capacity.blocks, r.capacity.block_size, r.capacity.tokens(), 100 * r.kv_utilization_mean,
        100 * r.kv_utilization_peak);
    h += line_chart({{"used / total", r.kv_utilization}}, "time (s)", "KV utilisation", 1.0);
    const auto& m = r.capacity.memory;
    h += fmt::format(
        "<h2>Memory per GPU</h2><table><tr><th>weights</th><td>{:.2f} GB</td></tr><tr><th>"
        "workspace</th><td>{:.2f} GB</td></tr><tr><th>communication</th><td>{:.2f} GB</td></tr>"
        "<tr><th>allocator and runtime</th><td>{:.2f} GB</td></tr><tr><th>KV cache</th><td>"
        "{:.2f} GB</td></tr></table>\n",
        m.weights / 1e9, m.temporary / 1e9, m.communication / 1e9, m.allocator / 1e9,
        r.capacity.kv_bytes_per_token_rank * static_cast<double>(r.capacity.tokens()) / 1e9);
    if (!r.notes.empty()) {
      h += "<h2>Notes</h2><ul>";
      for (const auto& n : r.notes) h += "<li>" + html_escape(n) + "</li>";
      h += "</ul>\n";
    }
  }
  return h + "</body></html>\n";
}

}  // namespace meshsim
