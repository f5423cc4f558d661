#include "report/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "report/html_escape.hpp"

namespace meshsim {
namespace {

// One colour per component, the same in every chart.
const std::map<std::string, std::string>& palette() {
  static const std::map<std::string, std::string> kColors = {{"compute", "#4e79a7"},
                                                             {"tp", "#f28e2b"},
                                                             {"dp", "#e15759"},
                                                             {"pp", "#76b7b2"},
                                                             {"cp", "#59a14f"},
                                                             {"ep", "#edc948"},
                                                             {"bubble", "#bab0ac"},
                                                             {"weights", "#4e79a7"},
                                                             {"gradients", "#a0cbe8"},
                                                             {"optimizer", "#f28e2b"},
                                                             {"activations", "#59a14f"},
                                                             {"temporary", "#edc948"},
                                                             {"communication", "#b07aa1"},
                                                             {"allocator", "#bab0ac"},
                                                             {"kv_cache", "#ff9da7"},
                                                             {"dp_gather", "#ff9da7"},
                                                             {"p2p", "#9c755f"}};
  return kColors;
}

std::string color(const std::string& k) {
  const auto it = palette().find(k);
  return it == palette().end() ? "#888888" : it->second;
}

std::string esc(const std::string& s) {
  return html_escape(s);
}

std::string legend(const std::vector<std::string>& keys, double y) {
  std::string s;
  double x = 10;
  for (const auto& k : keys) {
    s += fmt::format(R"(<rect x="{:.0f}" y="{:.0f}" width="12" height="12" fill="{}"/>)", x, y,
                     color(k));
    s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" font-size="12">{}</text>)", x + 16, y + 11,
                     esc(k));
    x += 30 + 7.5 * static_cast<double>(k.size());
  }
  return s;
}

// Horizontal stacked bars: one row per label, segments in `keys` order, scaled to `max`.
std::string stacked_bars(
    const std::vector<std::pair<std::string, std::map<std::string, double>>>& rows,
    const std::vector<std::string>& keys, double max, const std::string& unit, double divisor,
    std::optional<double> line, const std::string& line_label) {
  const double left = 470, width = 440, row_h = 22;
  const double height = 40 + row_h * static_cast<double>(rows.size()) + 30;
  std::string s = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="{:.0f}" font-family="sans-serif">)",
      height);
  s += legend(keys, 8);
  double y = 34;
  for (const auto& [label, parts] : rows) {
    s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" font-size="11" text-anchor="end">{}</text>)",
                     left - 6, y + 14, esc(label));
    double x = left, total = 0;
    for (const auto& k : keys) {
      const auto it = parts.find(k);
      if (it == parts.end() || it->second <= 0) continue;
      const double w = max > 0 ? it->second / max * width : 0;
      s += fmt::format(
          R"(<rect class="seg" x="{:.2f}" y="{:.0f}" width="{:.2f}" height="{:.0f}" fill="{}"><title>{}: {:.4g} {}</title></rect>)",
          x, y, w, row_h - 4, color(k), esc(k), it->second / divisor, unit);
      x += w;
      total += it->second;
    }
    s += fmt::format(R"(<text x="{:.2f}" y="{:.0f}" font-size="11">{:.4g} {}</text>)", x + 4,
                     y + 14, total / divisor, unit);
    y += row_h;
  }
  if (line && max > 0) {
    const double lx = left + *line / max * width;
    s += fmt::format(
        R"(<line x1="{:.2f}" y1="30" x2="{:.2f}" y2="{:.0f}" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>)",
        lx, lx, y);
    s += fmt::format(R"(<text x="{:.2f}" y="{:.0f}" font-size="11" fill="#d62728">{}</text>)",
                     lx + 3, y + 14, esc(line_label));
  }
  return s + "</svg>\n";
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
  const double height = 40 + lane_h * static_cast<double>(lanes.size()) + 20;
  std::string s = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="{:.0f}" font-family="sans-serif">)",
      height);
  s += legend({"compute", "tp", "cp", "dp", "dp_gather", "ep", "pp"}, 8);
  std::map<std::uint32_t, double> lane_y;
  double y = 32;
  for (auto l : lanes) {
    const auto& st = g.stream(StreamId{l});
    s += fmt::format(
        R"(<text x="{:.0f}" y="{:.0f}" font-size="11" text-anchor="end">rank {} {}</text>)",
        left - 6, y + 12, st.rank, stream_kind_name(st.kind));
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
    const double x0 = left + t.start.seconds() / end * width;
    const double w = std::max((t.end - t.start).seconds() / end * width, 0.3);
    const auto kind = std::string(stream_kind_name(g.stream(op.stream).kind));
    s += fmt::format(
        R"(<rect class="op" x="{:.2f}" y="{:.0f}" width="{:.2f}" height="{:.0f}" fill="{}"><title>{}</title></rect>)",
        x0, it->second, w, lane_h - 4, color(kind), esc(op.name));
  }
  s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" font-size="11">0</text>)", left, y + 14);
  s +=
      fmt::format(R"(<text x="{:.0f}" y="{:.0f}" font-size="11" text-anchor="end">{:.4g} s</text>)",
                  left + width, y + 14, end);
  return s + "</svg>\n";
}

}  // namespace

std::string render_html(const HtmlReport& r) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<title>" + esc(r.title) + "</title>";
  h += "<style>body{font-family:sans-serif;margin:24px;max-width:1040px}h2{margin-top:28px}"
       "pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}</style></head><body>\n";
  h += "<h1>" + esc(r.title) + "</h1>\n";
  h += "<p>Command:</p><pre>" + esc(r.command) + "</pre>\n";
  if (!r.ranked.empty()) {
    const std::vector<std::string> keys{"compute", "tp", "dp", "pp", "cp", "ep", "bubble"};
    std::vector<std::pair<std::string, std::map<std::string, double>>> rows;
    double max = 0;
    for (std::size_t i = 0; i < r.ranked.size(); ++i) {
      const auto& c = r.ranked[i];
      std::map<std::string, double> parts = c.exposed_s;
      parts["compute"] = c.compute_s;
      parts["bubble"] = c.bubble_s;
      rows.push_back({fmt::format("#{} {}", i + 1, c.label.substr(0, 64)), parts});
      max = std::max(max, c.step_s);
    }
    h += "<h2>Where the step goes</h2><p>Compute, communication with nothing to overlap it "
         "(by group) and pipeline bubble; they add up to the step time.</p>\n";
    h += stacked_bars(rows, keys, max, "s", 1.0, std::nullopt, "");
    const std::vector<std::string> mkeys{"weights",   "gradients",     "optimizer", "activations",
                                         "temporary", "communication", "allocator", "kv_cache"};
    std::vector<std::pair<std::string, std::map<std::string, double>>> mrows;
    double mmax = r.gpu_bytes;
    for (std::size_t i = 0; i < r.ranked.size(); ++i) {
      const auto& m = r.ranked[i].memory;
      mrows.push_back({fmt::format("#{} {}", i + 1, r.ranked[i].label.substr(0, 64)),
                       {{"weights", m.weights},
                        {"gradients", m.gradients},
                        {"optimizer", m.optimizer},
                        {"activations", m.activations},
                        {"temporary", m.temporary},
                        {"communication", m.communication},
                        {"allocator", m.allocator},
                        {"kv_cache", m.kv_cache}}});
      mmax = std::max(mmax, m.total());
    }
    h += "<h2>Memory per GPU</h2><p>The worst pipeline stage, by category; the dashed line is the "
         "GPU's capacity.</p>\n";
    h += stacked_bars(mrows, mkeys, mmax, "GB", 1e9, r.gpu_bytes,
                      fmt::format("{} {:.1f} GB", r.gpu, r.gpu_bytes / 1e9));
  }
  if (r.trace && r.replay) {
    h += "<h2>Step timeline of " +
         esc(r.ranked.empty() ? std::string("the run") : "#1 " + r.ranked.front().label) +
         "</h2><p>Representative ranks, a lane per stream.</p>\n";
    h += timeline(*r.trace, *r.replay);
  }
  const auto& t = r.topology;
  h += "<h2>Cluster</h2><table>";
  h += fmt::format(
      "<tr><th>cluster</th><td>{}</td></tr><tr><th>GPUs</th><td>{} × {} in {} "
      "nodes</td></tr>",
      esc(r.cluster), t.gpus, esc(r.gpu), t.nodes);
  h += fmt::format(
      "<tr><th>per GPU, per direction</th><td>NVLink {:.0f} GB/s, PCIe {:.0f} GB/s, "
      "network {:.1f} GB/s</td></tr>",
      t.nvlink_Bps / 1e9, t.pcie_Bps / 1e9, t.network_Bps / 1e9);
  std::string verts, links;
  for (const auto& [k, v] : t.vertices) verts += fmt::format("{} {}; ", v, k);
  for (const auto& [k, v] : t.links) links += fmt::format("{} {}; ", v, k);
  h += "<tr><th>vertices</th><td>" + esc(verts) + "</td></tr><tr><th>links</th><td>" + esc(links) +
       "</td></tr></table>\n";
  if (!r.notes.empty()) {
    h += "<h2>Notes</h2><ul>";
    for (const auto& n : r.notes) h += "<li>" + esc(n) + "</li>";
    h += "</ul>\n";
  }
  h += "<p style=\"color:#777;font-size:12px\">meshsim: simulated numbers, from the compute model, "
       "the network model and the memory model; see the README for their sources.</p>\n";
  return h + "</body></html>\n";
}

}  // namespace meshsim
