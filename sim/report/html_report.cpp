#include "report/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "memory/memory_model.hpp"
#include "report/html_escape.hpp"
#include "report/search_report.hpp"
#include "report/svg_chart.hpp"

namespace meshsim {
namespace {

const std::vector<std::string> kStepKeys{"compute", "tp", "dp", "pp", "cp", "ep", "bubble"};
const std::vector<std::string> kMemoryKeys = [] {
  std::vector<std::string> keys;
  for (const auto& c : memory_categories(MemoryBreakdown{})) keys.emplace_back(c.name);
  return keys;
}();

double exposed(const ReportCandidate& c, const std::string& group) {
  const auto it = c.exposed_s.find(group);
  return it == c.exposed_s.end() ? 0.0 : it->second;
}

double exposed_total(const ReportCandidate& c) {
  double t = 0;
  for (const auto& [g, v] : c.exposed_s) t += v;
  return t;
}

std::string shapes_note(std::size_t n) {
  return n > 1 ? fmt::format(" ({} equivalent shapes)", n) : "";
}

// Step components in `unit` (s, ms): compute, exposed communication by group, bubble, and the
// GPU waiting for the host when it did.
std::map<std::string, double> step_parts(const ReportCandidate& c, double per_second,
                                         bool with_compute) {
  std::map<std::string, double> parts;
  for (const auto& [g, v] : c.exposed_s) parts[g] = v * per_second;
  if (with_compute) parts["compute"] = c.compute_s * per_second;
  parts["bubble"] = c.bubble_s * per_second;
  if (c.host_wait_s > 0) parts["host"] = c.host_wait_s * per_second;
  return parts;
}

std::map<std::string, double> memory_parts(const MemoryBreakdown& m) {
  std::map<std::string, double> parts;
  for (const auto& c : memory_categories(m)) parts[c.name] = c.bytes / 1e9;
  return parts;
}

std::string timeline(const Trace& trace, const ReplayResult& replay) {
  // A lane per (rank, stream) that has ops; at most 4 ranks.
  std::vector<std::int32_t> ranks = trace.ranks;
  if (ranks.size() > 4) ranks.resize(4);
  const std::set<std::int32_t> shown(ranks.begin(), ranks.end());
  std::vector<std::uint32_t> lanes;
  const auto& g = trace.graph;
  for (std::uint32_t s = 0; s < g.stream_count(); ++s) {
    const auto& st = g.stream(StreamId{s});
    if (!st.ops.empty() && shown.contains(st.rank)) lanes.push_back(s);
  }
  const double left = 150, width = 820, lane_h = 18;
  const double end = std::max(replay.makespan.seconds(), 1e-12);
  const auto unit = time_unit(end);
  const auto ticks = nice_ticks(end * unit.per_second);
  const double span = ticks.top / unit.per_second;  // seconds across the plot
  const double top = 32;
  const double base = top + lane_h * static_cast<double>(lanes.size()) + 2;
  std::string s = fmt::format(
      R"(<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="1000" height="{:.0f}" font-family="sans-serif" font-size="11">)",
      base + 40);
  {
    std::vector<std::pair<std::string, std::string>> keys;
    for (const std::string k : {"compute", "tp", "cp", "dp", "dp_gather", "ep", "pp"})
      keys.emplace_back(k, component_color(k));
    legend(s, keys, 10, 8, 990);
  }
  std::map<std::uint32_t, double> lane_y;
  double y = top;
  for (auto l : lanes) {
    const auto& st = g.stream(StreamId{l});
    s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" text-anchor="end">rank {} {}</text>)", left - 6,
                     y + 12, st.rank, stream_kind_name(st.kind));
    s += fmt::format(R"(<line x1="{:.0f}" y1="{:.0f}" x2="{:.0f}" y2="{:.0f}" stroke="#eee"/>)",
                     left, y + lane_h - 2, left + width, y + lane_h - 2);
    lane_y[l] = y;
    y += lane_h;
  }
  for (std::uint32_t i = 0; i < g.op_count(); ++i) {
    const auto& op = g.op(OpId{i});
    const auto it = lane_y.find(op.stream.value);
    if (it == lane_y.end()) continue;
    const auto& t = replay.ops[i];
    const double x0 = left + t.start.seconds() / span * width;
    const double w = std::max((t.end - t.start).seconds() / span * width, 0.3);
    const auto kind = std::string(stream_kind_name(g.stream(op.stream).kind));
    s += fmt::format(
        R"(<rect class="op" x="{:.2f}" y="{:.0f}" width="{:.2f}" height="{:.0f}" fill="{}"><title>{}</title></rect>)",
        x0, it->second, w, lane_h - 4, component_color(kind), html_escape(op.name));
  }
  s += x_axis(ticks, left, width, base, fmt::format("time in the step ({})", unit.name));
  s += y_axis_title(12, (top + base) / 2, "rank, stream");
  return s + "</svg>\n";
}

std::string row_label(std::size_t rank, const std::string& label, std::size_t shapes) {
  return fmt::format("#{} {}{}", rank, label.substr(0, 72),
                     shapes > 1 ? fmt::format(" ×{}", shapes) : "");
}

// Where each shown layout's step goes, the part of it that is not compute, and its memory.
std::string ranked_charts(const HtmlReport& r, const std::vector<CandidateGroup>& groups,
                          std::size_t shown) {
  double max_step = 0;
  for (std::size_t i = 0; i < shown; ++i)
    max_step = std::max(max_step, r.ranked[groups[i].members.front()].step_s);
  const auto unit = time_unit(max_step);
  BarChart step{kStepKeys,        {},           fmt::format("time per step ({})", unit.name),
                "layout, ranked", std::nullopt, "",
                unit.name};
  BarChart other{{"tp", "dp", "pp", "cp", "ep", "bubble"},
                 {},
                 fmt::format("exposed communication and bubble per step ({})", unit.name),
                 "layout, ranked",
                 std::nullopt,
                 "",
                 unit.name};
  BarChart memory{kMemoryKeys,
                  {},
                  "memory per GPU, worst pipeline stage (GB)",
                  "layout, ranked",
                  r.gpu_bytes / 1e9,
                  fmt::format("{} {:.1f} GB", r.gpu, r.gpu_bytes / 1e9),
                  "GB"};
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& g = groups[i];
    const auto& c = r.ranked[g.members.front()];
    std::string tip;
    for (std::size_t k = 1; k < g.members.size(); ++k)
      tip += (tip.empty() ? "equivalent: " : "; ") + r.ranked[g.members[k]].label;
    const auto label = row_label(g.members.front() + 1, c.label, g.members.size());
    step.rows.push_back({label, tip, step_parts(c, unit.per_second, true)});
    other.rows.push_back({label, tip, step_parts(c, unit.per_second, false)});
    memory.rows.push_back({label, tip, memory_parts(c.memory)});
  }
  std::string h =
      "<h2>Where the step goes</h2><p>Compute, communication with nothing to overlap "
      "it (by group) and pipeline bubble; they add up to the step time.";
  if (shown > 1)
    h += fmt::format(
        " Equivalent layouts are one row (×N: N equivalent shapes; the same step time, or "
        "another ZeRO stage or HSDP group of the same shape within {:.1f} %).",
        100 * kEquivalentStep);
  h += "</p>\n" + bar_chart(step);
  if (shown > 1)
    h += "<h2>What separates them</h2><p>The same rows without compute: the exposed "
         "communication and bubble that decide the ranking.</p>\n" +
         bar_chart(other);
  h += "<h2>Memory per GPU</h2><p>The worst pipeline stage, by category; the dashed line is the "
       "GPU's capacity.</p>\n" +
       bar_chart(memory);
  return h;
}

std::string headline(const HtmlReport& r) {
  const auto& c = r.ranked.front();
  const double mem = c.memory.total();
  std::string h = "<h2>Headline</h2><table>";
  h += fmt::format("<tr><th>step time</th><td>{:.4g} s</td></tr>", c.step_s);
  h += fmt::format("<tr><th>tokens/s</th><td>{:.0f} ({:.0f} per GPU)</td></tr>", c.tokens_per_s,
                   c.tokens_per_s_per_gpu);
  h += fmt::format("<tr><th>MFU</th><td>{:.1f}&nbsp;%</td></tr>", 100 * c.mfu);
  h += fmt::format("<tr><th>compute</th><td>{:.4g} s</td></tr>", c.compute_s);
  if (c.interference_s > 0)
    h += fmt::format(
        "<tr><th>&nbsp;&nbsp;of it, slowed by collectives beside it</th>"
        "<td>{:.4g} s</td></tr>",
        c.interference_s);
  if (c.comm_interference_s > 0)
    h += fmt::format(
        "<tr><th>collective time lost to HBM sharing and waiting for SMs</th>"
        "<td>{:.4g} s</td></tr>",
        c.comm_interference_s);
  for (const auto& [g, v] : c.exposed_s)
    h += fmt::format("<tr><th>exposed {} communication</th><td>{:.4g} s</td></tr>", html_escape(g),
                     v);
  h += fmt::format("<tr><th>pipeline bubble</th><td>{:.4g} s ({:.1f} % of the step)</td></tr>",
                   c.bubble_s, c.step_s > 0 ? 100 * c.bubble_s / c.step_s : 0.0);
  if (c.host_wait_s > 0)
    h += fmt::format(
        "<tr><th>GPU waiting for the host's launches</th><td>{:.4g} s ({:.1f} % of the "
        "step)</td></tr>",
        c.host_wait_s, c.step_s > 0 ? 100 * c.host_wait_s / c.step_s : 0.0);
  h += fmt::format("<tr><th>memory</th><td>{}: {:.1f} of {:.1f} GB per GPU (worst stage)</td></tr>",
                   mem <= r.gpu_bytes ? "fits" : "<b>does not fit</b>", mem / 1e9,
                   r.gpu_bytes / 1e9);
  return h + "</table>\n";
}

std::string search_sections(const HtmlReport& r, const std::vector<CandidateGroup>& groups) {
  const auto& s = *r.search;
  const auto& best = r.ranked.front();
  std::string h = "<h2>Winner</h2>";
  h += fmt::format(
      "<p><b>{}</b>{}: {:.4g} s per step, {:.0f} tokens/s per GPU, MFU {:.1f} %, {:.1f} of "
      "{:.1f} GB per GPU.</p>\n",
      html_escape(best.label), shapes_note(groups.front().members.size()), best.step_s,
      best.tokens_per_s_per_gpu, 100 * best.mfu, best.memory.total() / 1e9, r.gpu_bytes / 1e9);
  if (groups.size() > 1) {
    const auto& next = r.ranked[groups[1].members.front()];
    h += "<p>Why #1 wins: " + html_escape(why_winner(best, next, groups[1].members.front() + 1)) +
         ".</p>\n";
  }
  if (!s.launch.empty())
    h += "<p>Launch line (" + html_escape(s.launch_format) + "):</p><pre>" + html_escape(s.launch) +
         "</pre>\n";
  // The ranked table, equivalent shapes grouped.
  h += "<h2>Ranked layouts</h2><table><tr><th>#</th><th>layout</th><th>step s</th>"
       "<th>tok/s/GPU</th><th>MFU</th><th>compute s</th><th>exposed s</th><th>bubble s</th>"
       "<th>memory GB</th></tr>\n";
  const std::size_t shown = std::min(s.top, groups.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& g = groups[i];
    const auto& c = r.ranked[g.members.front()];
    std::string label = html_escape(c.label);
    for (std::size_t k = 1; k < g.members.size(); ++k) {
      const auto& m = r.ranked[g.members[k]];
      label += fmt::format("<br><small>≈ #{} {} ({:.4f} s, {:.1f} GB)</small>", g.members[k] + 1,
                           html_escape(m.label), m.step_s, m.memory.total() / 1e9);
    }
    h += fmt::format(
        "<tr><td>{}</td><td>{}{}</td><td>{:.4f}</td><td>{:.0f}</td><td>{:.1f}&nbsp;%</td>"
        "<td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.1f}</td></tr>\n",
        g.members.front() + 1, label, shapes_note(g.members.size()), c.step_s,
        c.tokens_per_s_per_gpu, 100 * c.mfu, c.compute_s, exposed_total(c), c.bubble_s,
        c.memory.total() / 1e9);
  }
  h += "</table>\n";
  h += ranked_charts(r, groups, shown);
  // Every simulated layout: step time against memory, coloured by TP, with the Pareto front.
  {
    double max_step = 0;
    for (const auto& c : r.ranked) max_step = std::max(max_step, c.step_s);
    const auto unit = time_unit(max_step);
    std::map<std::int64_t, XYSeries> by_tp;
    for (const auto& c : r.ranked) {
      auto& series = by_tp[c.tp];
      series.points.emplace_back(c.step_s * unit.per_second, c.memory.total() / 1e9);
      series.tips.push_back(fmt::format("{}: {:.4g} {}, {:.1f} GB", c.label,
                                        c.step_s * unit.per_second, unit.name,
                                        c.memory.total() / 1e9));
    }
    XYChart chart;
    chart.x_title = fmt::format("time per step ({})", unit.name);
    chart.y_title = "memory per GPU (GB)";
    chart.width = 1000;
    chart.height = 320;
    std::size_t i = 0;
    for (auto& [tp, series] : by_tp) {
      series.name = fmt::format("tp={}", tp);
      series.color = series_color(i++);
      series.dots = true;
      chart.series.push_back(std::move(series));
    }
    XYSeries front{"Pareto front", "#222222", {}, false, {}};
    for (auto k : pareto_front(r.ranked))
      front.points.emplace_back(r.ranked[k].step_s * unit.per_second,
                                r.ranked[k].memory.total() / 1e9);
    chart.series.push_back(std::move(front));
    h += fmt::format(
        "<h2>Every simulated layout</h2><p>{} layouts: step time against memory per GPU, "
        "coloured by TP degree; the line joins those no other layout beats on both.</p>\n",
        r.ranked.size());
    h += xy_chart(chart);
  }
  // Best per TP degree.
  {
    h += "<h2>Best per TP degree</h2><table><tr><th>TP</th><th>rank</th><th>layout</th>"
         "<th>step s</th><th>exposed tp s</th><th>MFU</th></tr>\n";
    for (const auto& [tp, i] : best_per_tp(r.ranked, s.tp_best_at_least)) {
      if (const auto far = s.tp_best_at_least.find(tp); far != s.tp_best_at_least.end()) {
        h += fmt::format(
            "<tr><td>{}</td><td colspan=\"5\">at least {:.4f} s: beyond reach of the K-th best, "
            "not every layout of this degree was simulated{}</td></tr>\n",
            tp, far->second,
            i == kNoLayout
                ? std::string(" (none was)")
                : fmt::format(" (best simulated: {}, {:.4f} s, rank {})",
                              html_escape(r.ranked[i].label), r.ranked[i].step_s, i + 1));
        continue;
      }
      const auto& c = r.ranked[i];
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.1f}&nbsp;"
          "%</td></tr>\n",
          tp, i + 1, html_escape(c.label), c.step_s, exposed(c, "tp"), 100 * c.mfu);
    }
    h += "</table>\n";
  }
  // The search space: what was left out and why.
  h += fmt::format(
      "<h2>Search space</h2><p>{} combinations; {} simulated.</p><table><tr><th>"
      "rejected because</th><th>layouts</th></tr>\n",
      s.combinations, r.ranked.size());
  for (const auto& [why, n] : s.rejected)
    h += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", html_escape(why), n);
  h += "</table>\n";
  if (s.moved_layers > 0) h += "<p>" + html_escape(moved_layers_text(s.moved_layers)) + ".</p>\n";
  if (!s.heuristic_label.empty()) {
    std::string where;
    if (s.heuristic_rank > 0 && !s.heuristic_rank_exact)
      where = fmt::format(
          "outside the top {}, {:.1f} % slower than the winner (not every faster layout was "
          "simulated)",
          s.top, 100 * (r.ranked[s.heuristic_rank - 1].step_s / best.step_s - 1));
    else if (s.heuristic_rank > 0)
      where = fmt::format("rank {} of {}, {:.1f} % slower than the winner", s.heuristic_rank,
                          r.ranked.size(),
                          100 * (r.ranked[s.heuristic_rank - 1].step_s / best.step_s - 1));
    else if (s.heuristic_step_s)
      where = fmt::format("not in the searched space; simulated {:.4g} s, {:.1f} % slower",
                          *s.heuristic_step_s, 100 * (*s.heuristic_step_s / best.step_s - 1));
    else
      where = "does not run on this cluster";
    h += "<p>Seed heuristic (" + html_escape(s.heuristic_rule) +
         "): " + html_escape(s.heuristic_label) + " → " + html_escape(where) + ".</p>\n";
  }
  h += "<h2>Assumptions</h2><ul>";
  if (!s.job.empty()) h += "<li>Job: " + html_escape(s.job) + "</li>";
  h += "<li>Stack <b>" + html_escape(s.stack) + "</b>: " + html_escape(s.stack_description) +
       "</li>";
  if (!s.kernel_model.empty()) h += "<li>Kernel model: " + html_escape(s.kernel_model) + "</li>";
  h += "</ul>\n";
  return h;
}

}  // namespace

std::string render_html(const HtmlReport& r) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<title>" + html_escape(r.title) + "</title>";
  h += "<style>body{font-family:sans-serif;margin:24px;max-width:1040px}h2{margin-top:28px}"
       "pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}</style></head><body>\n";
  h += "<h1>" + html_escape(r.title) + "</h1>\n";
  h += "<p>Command:</p><pre>" + html_escape(r.command) + "</pre>\n";
  if (!r.ranked.empty()) {
    const auto groups = group_equivalent(r.ranked);
    if (r.search)
      h += search_sections(r, groups);
    else
      h += headline(r) + ranked_charts(r, groups, std::min<std::size_t>(groups.size(), 10));
  }
  if (r.trace && r.replay) {
    h += "<h2>Step timeline of " +
         html_escape(r.ranked.empty() ? std::string("the run") : "#1 " + r.ranked.front().label) +
         "</h2>" +
         fmt::format(
             "<p>Representative ranks, a lane per stream; the step as replayed here: "
             "{:.4f} s.</p>\n",
             r.replay->makespan.seconds());
    h += timeline(*r.trace, *r.replay);
  }
  const auto& t = r.topology;
  h += "<h2>Cluster</h2><table>";
  h += fmt::format(
      "<tr><th>cluster</th><td>{}</td></tr><tr><th>GPUs</th><td>{} × {} in {} "
      "nodes</td></tr>",
      html_escape(r.cluster), t.gpus, html_escape(r.gpu), t.nodes);
  h += fmt::format(
      "<tr><th>per GPU, per direction</th><td>NVLink {:.0f} GB/s, PCIe {:.0f} GB/s, "
      "{}network {:.1f} GB/s</td></tr>",
      t.nvlink_Bps / 1e9, t.pcie_Bps / 1e9,
      t.c2c_Bps > 0 ? fmt::format("NVLink-C2C {:.0f} GB/s, ", t.c2c_Bps / 1e9) : "",
      t.network_Bps / 1e9);
  std::string verts, links;
  for (const auto& [k, v] : t.vertices) verts += fmt::format("{} {}; ", v, k);
  for (const auto& [k, v] : t.links) links += fmt::format("{} {}; ", v, k);
  h += "<tr><th>vertices</th><td>" + html_escape(verts) + "</td></tr><tr><th>links</th><td>" +
       html_escape(links) + "</td></tr></table>\n";
  if (!r.notes.empty()) {
    h += "<h2>Notes</h2><ul>";
    for (const auto& n : r.notes) h += "<li>" + html_escape(n) + "</li>";
    h += "</ul>\n";
  }
  h += "<p style=\"color:#777;font-size:12px\">meshsim: simulated numbers, from the compute model, "
       "the network model and the memory model; see the README for their sources.</p>\n";
  return h + "</body></html>\n";
}

}  // namespace meshsim
