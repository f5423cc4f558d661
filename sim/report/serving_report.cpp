#include "report/serving_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/html_escape.hpp"
#include "report/metrics_json.hpp"
#include "report/svg_chart.hpp"
#include "serving/engine.hpp"

namespace meshsim {
namespace {

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
    h += "<h2>Latency CDFs</h2><p>Fraction of requests at or below a latency; a dashed line "
         "is an SLO (the axis extends to it).</p>\n";
    const auto cdf_chart = [](const std::string& name, const std::vector<double>& sorted_s,
                              double slo_s, const std::string& what) {
      const auto unit = time_unit(sorted_s.empty() ? slo_s : std::max(sorted_s.back(), slo_s));
      std::vector<double> v;
      v.reserve(sorted_s.size());
      for (double x : sorted_s) v.push_back(x * unit.per_second);
      XYChart c;
      c.series.push_back({name, series_color(0), cdf(v), false, {}});
      c.x_title = fmt::format("{} ({})", what, unit.name);
      c.y_title = "fraction of requests";
      c.y_max = 1.0;
      if (slo_s > 0) c.x_markers.emplace_back(slo_s * unit.per_second, "SLO");
      return xy_chart(c);
    };
    h += cdf_chart("TTFT", r.ttft_samples, rep.slo_ttft_s, "time to first token");
    h += cdf_chart("TPOT", r.tpot_samples, rep.slo_tpot_s, "time per output token");
    {
      // Inter-token latency from the run's histogram (every gap, not per request).
      const auto unit = time_unit(r.itl_cdf.empty() ? 0 : r.itl_cdf.back().first);
      XYChart c;
      XYSeries itl{"ITL", series_color(0), {}, false, {}};
      for (const auto& [x, f] : r.itl_cdf) itl.points.emplace_back(x * unit.per_second, f);
      c.series.push_back(std::move(itl));
      c.x_title = fmt::format("inter-token latency ({})", unit.name);
      c.y_title = "fraction of tokens";
      c.y_max = 1.0;
      h += xy_chart(c);
    }
    h += cdf_chart("E2E", r.e2e_samples, 0, "end-to-end latency");
    {
      const auto unit = time_unit(r.ttft_samples.empty() ? 0 : r.ttft_samples.back());
      XYChart c;
      XYSeries pts{"", series_color(0), {}, true, {}};
      for (const auto& [prompt, t] : r.ttft_by_prompt) {
        pts.points.emplace_back(static_cast<double>(prompt), t * unit.per_second);
        pts.tips.push_back(
            fmt::format("{} tokens: {:.4g} {}", prompt, t * unit.per_second, unit.name));
      }
      c.series.push_back(std::move(pts));
      c.x_title = "prompt length (tokens)";
      c.y_title = fmt::format("TTFT ({})", unit.name);
      h += fmt::format("<h2>TTFT against prompt length</h2><p>{} of the measured requests.</p>\n",
                       r.ttft_by_prompt.size());
      h += xy_chart(c);
    }
    h += "<h2>Over time</h2><p>Requests running (admitted, holding KV cache) and waiting (queued "
         "or swapped out) across the replicas; sequences per iteration (mean over replicas); "
         "output throughput.</p>\n";
    {
      XYChart c;
      XYSeries run{"running", series_color(0), {}, false, {}},
          wait{"waiting", series_color(1), {}, false, {}};
      XYSeries batch{"sequences per iteration", series_color(2), {}, false, {}};
      for (const auto& x : r.timeline) {
        run.points.emplace_back(x.t_s, static_cast<double>(x.running));
        wait.points.emplace_back(x.t_s, static_cast<double>(x.waiting));
        batch.points.emplace_back(x.t_s, x.batch_sequences);
      }
      c.series = {std::move(run), std::move(wait)};
      c.x_title = "time (s)";
      c.y_title = "requests";
      h += xy_chart(c);
      XYChart b;
      b.series.push_back(std::move(batch));
      b.x_title = "time (s)";
      b.y_title = "batch (sequences)";
      h += xy_chart(b);
      // Throughput over windows of about 1/60 of the run (the slope of tokens emitted so far).
      XYChart t;
      XYSeries tput{"output tokens/s", series_color(4), {}, false, {}};
      const double span = r.timeline.empty() ? 0 : r.timeline.back().t_s - r.timeline.front().t_s;
      std::size_t from = 0;
      for (std::size_t i = 1; i < r.timeline.size(); ++i) {
        const auto& a = r.timeline[from];
        const auto& z = r.timeline[i];
        if (z.t_s - a.t_s < span / 60 && i + 1 < r.timeline.size()) continue;
        if (z.t_s > a.t_s)
          tput.points.emplace_back(
              (a.t_s + z.t_s) / 2,
              static_cast<double>(z.output_tokens - a.output_tokens) / (z.t_s - a.t_s));
        from = i;
      }
      t.series.push_back(std::move(tput));
      t.x_title = "time (s)";
      t.y_title = "output tokens/s";
      h += xy_chart(t);
    }
    h += fmt::format(
        "<h2>KV cache</h2><p>{} blocks of {} tokens per replica ({} tokens); utilisation mean "
        "{:.1f} %, peak {:.1f} %.</p>\n",
        r.capacity.blocks, r.capacity.block_size, r.capacity.tokens(), 100 * r.kv_utilization_mean,
        100 * r.kv_utilization_peak);
    {
      XYChart c;
      XYSeries kv{"used / total", series_color(0), {}, false, {}};
      for (const auto& x : r.timeline) kv.points.emplace_back(x.t_s, 100 * x.kv_used);
      c.series.push_back(std::move(kv));
      c.x_title = "time (s)";
      c.y_title = "KV utilisation (%)";
      c.y_max = 100;
      h += xy_chart(c);
    }
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

std::string serving_summary_text(const ServingResult& r) {
  std::string out;
  const auto line = [&out](const char* name, const LatencySummary& s, double scale,
                           const char* unit) {
    out += fmt::format("{:<18} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f}  {}\n", name, s.mean * scale,
                       s.p50 * scale, s.p90 * scale, s.p99 * scale, unit);
  };
  out +=
      fmt::format("{:<18} {:>10} {:>10} {:>10} {:>10}\n", "latency", "mean", "p50", "p90", "p99");
  line("TTFT", r.ttft, 1, "s");
  line("TPOT", r.tpot, 1e3, "ms");
  line("ITL", r.itl, 1e3, "ms");
  line("E2E", r.e2e, 1, "s");
  line("scheduling delay", r.scheduling_delay, 1, "s");
  out += fmt::format(
      "throughput: {:.3f} req/s, {:.1f} output tokens/s, {:.1f} tokens/s/GPU over {:.2f} s\n",
      r.requests_per_s, r.output_tokens_per_s, r.tokens_per_s_per_gpu, r.makespan_s);
  out += fmt::format("goodput: {:.3f} req/s meet the SLOs\n", r.goodput_requests_per_s);
  out += fmt::format("requests: {} completed, {} rejected; {} preemptions; {} iterations\n",
                     r.completed, r.rejected, r.preemptions, r.iterations);
  if (r.swapped_out_blocks > 0)
    out += fmt::format("swap: {} blocks out, {} back in, {:.3f} s of copies per GPU\n",
                       r.swapped_out_blocks, r.swapped_in_blocks, r.swap_seconds);
  out += fmt::format(
      "KV cache: {} blocks × {} tokens per replica ({:.1f} KB/token/GPU); utilisation mean "
      "{:.1f} %, peak {:.1f} %\n",
      r.capacity.blocks, r.capacity.block_size, r.capacity.kv_bytes_per_token_rank / 1e3,
      100 * r.kv_utilization_mean, 100 * r.kv_utilization_peak);
  if (const auto& pc = r.prefix_cache; pc.enabled)
    out += fmt::format(
        "prefix cache: {:.1f} % of looked-up prompt tokens hit ({} prefill tokens saved); TTFT "
        "mean {:.3f} s with a hit ({} requests), {:.3f} s without ({})\n",
        100 * pc.hit_rate, pc.hit_tokens, pc.ttft_hit.mean, pc.hit_requests, pc.ttft_miss.mean,
        pc.miss_requests);
  if (const auto& sp = r.speculative; sp.enabled)
    out += fmt::format(
        "speculative decoding: {} verify steps, {:.1f} % of {} drafts accepted, {:.2f} tokens per "
        "step (expected {:.2f})\n",
        sp.steps, 100 * sp.acceptance_rate, sp.proposed, sp.tokens_per_step,
        sp.expected_tokens_per_step);
  if (r.kv_transfer.count > 0)
    out +=
        fmt::format("KV transfer: mean {:.2f} ms, p99 {:.2f} ms, {:.2f} GB in all\n",
                    1e3 * r.kv_transfer.mean, 1e3 * r.kv_transfer.p99, r.kv_transfer_bytes / 1e9);
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

Json serving_run_json(const ServingResult& r, const std::string& engine,
                      const SchedulerOptions& sch, std::int64_t tp) {
  Json doc = serving_json(r);
  doc["engine"] = {{"name", engine},
                   {"admission", name_of(sch.admission)},
                   {"preemption", name_of(sch.preemption)},
                   {"mixed_batches", sch.mixed_batches},
                   {"max_seqs", sch.max_seqs},
                   {"max_batch_tokens", sch.max_batch_tokens},
                   {"kv_budget", name_of(sch.kv_budget)},
                   {"kv_memory_fraction", sch.memory_fraction(tp)},
                   {"prefix_caching", sch.prefix_caching}};
  return doc;
}

std::string serving_search_text(const ServingSearchResult& found, const ServingSearchRun& run) {
  std::string out = fmt::format(
      "# {} on {} GPUs of {}; traffic: {}; SLO p99 TTFT ≤ {} s, p99 TPOT ≤ {} ms\n", run.model,
      run.gpus, run.cluster, run.traffic, run.slo_ttft_s, 1e3 * run.slo_tpot_s);
  out += fmt::format("{:>3} {:<18} {:>6} {:>9} {:>9} {:>10} {:>9} {:>10}\n", "#", "layout", "SLO",
                     "goodput", "TTFT p99", "TPOT p99", "E2E mean", "tok/s/GPU");
  int i = 0;
  for (const auto& c : found.candidates) {
    const auto layout = fmt::format("{} × tp={} pp={}", c.replicas, c.shape.tp, c.shape.pp);
    if (!c.refused.empty()) {
      out += fmt::format("{:>3} {:<18} refused: {}\n", ++i, layout, c.refused);
      continue;
    }
    const auto& r = c.result;
    out += fmt::format("{:>3} {:<18} {:>6} {:>9.2f} {:>8.3f}s {:>8.1f}ms {:>8.3f}s {:>10.1f}\n",
                       ++i, layout, c.meets_slo ? "met" : "missed", r.goodput_requests_per_s,
                       r.ttft.p99, 1e3 * r.tpot.p99, r.e2e.mean, r.tokens_per_s_per_gpu);
  }
  out += "verdict: " + found.verdict + "\n";
  const auto* best = found.candidates.empty() ? nullptr : &found.candidates.front();
  if (best && best->refused.empty() && best->meets_slo)
    out += fmt::format("fastest layout meeting the SLO: {} × tp={} pp={}\n", best->replicas,
                       best->shape.tp, best->shape.pp);
  else
    out += "no layout meets the SLO at this rate\n";
  return out;
}

Json serving_search_json(const ServingSearchResult& found) {
  Json rows = Json::array();
  for (const auto& c : found.candidates) {
    Json row = {{"tp", c.shape.tp}, {"pp", c.shape.pp}, {"replicas", c.replicas}};
    if (!c.refused.empty()) {
      row["refused"] = c.refused;
    } else {
      row["meets_slo"] = c.meets_slo;
      row["metrics"] = serving_json(c.result);
    }
    rows.push_back(row);
  }
  return Json{{"candidates", rows}, {"verdict", found.verdict}};
}

}  // namespace meshsim
