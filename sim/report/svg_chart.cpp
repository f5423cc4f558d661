#include "report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/html_escape.hpp"

namespace meshsim {
namespace {

constexpr double kFont = 11;  // px, every label

std::string svg_open(double width, double height) {
  return fmt::format(
      R"(<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" font-family="sans-serif" font-size="{:.0f}">)",
      width, height, kFont);
}

// A text label whose anchor keeps it inside [0, limit]: left-aligned at x unless it would run
// past the right edge, then right-aligned at x - 2·pad.
std::string fitted_text(double x, double y, const std::string& text, double limit,
                        const std::string& attrs) {
  const double w = text_width(text, kFont);
  if (x + w > limit - 2)
    return fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end" {}>{}</text>)",
                       std::max(x - 6, w), y, attrs, html_escape(text));
  return fmt::format(R"(<text x="{:.1f}" y="{:.1f}" {}>{}</text>)", x, y, attrs, html_escape(text));
}

}  // namespace

std::string y_axis_title(double x, double y, const std::string& title) {
  return fmt::format(
      R"svg(<text class="axis-title y" x="{0:.1f}" y="{1:.1f}" text-anchor="middle" transform="rotate(-90 {0:.1f} {1:.1f})">{2}</text>)svg",
      x, y, html_escape(title));
}

// Legend entries left to right from (x, y), wrapping at `limit`; returns the height used.
double legend(std::string& s, const std::vector<std::pair<std::string, std::string>>& entries,
              double x0, double y, double limit) {
  double x = x0, rows = 1;
  for (const auto& [name, color] : entries) {
    const double w = 16 + text_width(name, 12) + 14;
    if (x + w > limit && x > x0) {
      x = x0;
      y += 16;
      ++rows;
    }
    s += fmt::format(R"(<rect x="{:.0f}" y="{:.0f}" width="12" height="12" fill="{}"/>)", x, y,
                     color);
    s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" font-size="12">{}</text>)", x + 16, y + 11,
                     html_escape(name));
    x += w;
  }
  return 16 * rows;
}

double text_width(const std::string& text, double font_px) {
  std::size_t chars = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80) ++chars;  // UTF-8 code points
  return 0.6 * font_px * static_cast<double>(chars);
}

Ticks nice_ticks(double max, int target) {
  Ticks t;
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  const double raw = max / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  t.step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  // Relative slack, so a maximum that is a multiple of the step up to rounding is the top.
  const auto n = static_cast<int>(std::ceil(max / t.step - 1e-9));
  t.top = t.step * std::max(n, 1);
  for (int i = 0; i <= std::max(n, 1); ++i) t.values.push_back(t.step * i);
  return t;
}

std::string tick_label(double value, double step) {
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

TimeUnit time_unit(double max_seconds) {
  if (max_seconds >= 1) return {"s", 1};
  if (max_seconds >= 1e-3) return {"ms", 1e3};
  return {"µs", 1e6};
}

std::string component_color(const std::string& k) {
  // The same colour per component in every chart (Tableau 10).
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
  const auto it = kColors.find(k);
  return it == kColors.end() ? "#888888" : it->second;
}

std::string series_color(std::size_t i) {
  static const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColors[i % 10];
}

std::string x_axis(const Ticks& ticks, double left, double width, double y,
                   const std::string& title) {
  std::string s =
      fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#444"/>)", left,
                  y, left + width, y);
  for (double v : ticks.values) {
    const double x = left + width * v / ticks.top;
    s += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#444"/>)",
                     x, y, y + 4);
    s += fmt::format(R"(<text class="tick x" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)",
                     x, y + 15, tick_label(v, ticks.step));
  }
  s += fmt::format(
      R"(<text class="axis-title x" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)",
      left + width / 2, y + 30, html_escape(title));
  return s;
}

std::string bar_chart(const BarChart& c) {
  constexpr double kWidth = 1000, kRowH = 22;
  double label_w = 0, max = 0;
  for (const auto& r : c.rows) {
    label_w = std::max(label_w, text_width(r.label, kFont));
    double total = 0;
    for (const auto& [k, v] : r.parts) total += std::max(v, 0.0);
    max = std::max(max, total);
  }
  if (c.line) max = std::max(max, *c.line);
  const auto ticks = nice_ticks(max);
  const double left = std::min(24 + label_w + 6, 560.0);
  const double right = 90;  // the bar totals
  const double width = kWidth - left - right;
  std::string body;
  const double legend_h = legend(
      body,
      [&] {
        std::vector<std::pair<std::string, std::string>> e;
        for (const auto& k : c.keys) e.emplace_back(k, component_color(k));
        return e;
      }(),
      10, 8, kWidth - 10);
  const double top = 8 + legend_h + 14;
  double y = top;
  for (const auto& r : c.rows) {
    body += fmt::format(R"(<text x="{:.1f}" y="{:.0f}" text-anchor="end">{}</text>)", left - 6,
                        y + 14, html_escape(r.label));
    double x = left, total = 0;
    for (const auto& k : c.keys) {
      const auto it = r.parts.find(k);
      if (it == r.parts.end() || it->second <= 0) continue;
      const double w = it->second / ticks.top * width;
      body += fmt::format(
          R"(<rect class="seg" x="{:.2f}" y="{:.0f}" width="{:.2f}" height="{:.0f}" fill="{}"><title>{}: {:.4g} {}{}</title></rect>)",
          x, y, w, kRowH - 4, component_color(k), html_escape(k), it->second,
          html_escape(c.value_unit), r.tooltip.empty() ? "" : "\n" + html_escape(r.tooltip));
      x += w;
      total += it->second;
    }
    body += fmt::format(R"(<text x="{:.2f}" y="{:.0f}">{:.4g} {}</text>)", x + 4, y + 14, total,
                        html_escape(c.value_unit));
    y += kRowH;
  }
  const double base = y + 2;
  body +=
      fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#444"/>)",
                  left, top - 4, base);
  body += x_axis(ticks, left, width, base, c.x_title);
  body += y_axis_title(12, (top + base) / 2, c.y_title);
  if (c.line) {
    const double lx = left + *c.line / ticks.top * width;
    body += fmt::format(
        R"(<line x1="{0:.2f}" y1="{1:.1f}" x2="{0:.2f}" y2="{2:.1f}" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>)",
        lx, top - 12, base);
    body += fitted_text(lx + 3, top - 3, c.line_label, kWidth, R"(fill="#d62728")");
  }
  return svg_open(kWidth, base + 40) + body + "</svg>\n";
}

std::string xy_chart(const XYChart& c) {
  double x_max = 0, y_max = 0;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points) {
      x_max = std::max(x_max, x);
      y_max = std::max(y_max, y);
    }
  for (const auto& [x, label] : c.x_markers) x_max = std::max(x_max, x);
  const auto xt = nice_ticks(x_max);
  const auto yt = c.y_max ? nice_ticks(*c.y_max, 4) : nice_ticks(y_max, 4);
  double tick_w = 0;
  for (double v : yt.values) tick_w = std::max(tick_w, text_width(tick_label(v, yt.step), kFont));
  const double left = 24 + tick_w + 8, right = 16, top = 12, bottom = 44;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  const auto X = [&](double x) { return left + pw * x / xt.top; };
  const auto Y = [&](double y) { return top + ph * (1 - y / yt.top); };
  std::string s = svg_open(c.width, c.height);
  s += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#444"/>)",
                   left, top, top + ph);
  for (double v : yt.values) {
    s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#eee"/>)",
                     left, Y(v), left + pw, Y(v));
    s += fmt::format(R"(<text class="tick y" x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)",
                     left - 4, Y(v) + 4, tick_label(v, yt.step));
  }
  s += x_axis(xt, left, pw, top + ph, c.x_title);
  s += y_axis_title(12, top + ph / 2, c.y_title);
  for (const auto& [x, label] : c.x_markers) {
    s += fmt::format(
        R"(<line class="marker" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#c00" stroke-dasharray="4 3"/>)",
        X(x), top, top + ph);
    s += fitted_text(X(x) + 3, top + 10, label, c.width, R"(fill="#c00")");
  }
  double ly = top + 12;
  for (const auto& series : c.series) {
    if (series.dots) {
      for (std::size_t i = 0; i < series.points.size(); ++i) {
        const auto& [x, y] = series.points[i];
        s += fmt::format(R"(<circle class="dot" cx="{:.1f}" cy="{:.1f}" r="2.5" fill="{}">)", X(x),
                         Y(y), series.color);
        if (i < series.tips.size()) s += "<title>" + html_escape(series.tips[i]) + "</title>";
        s += "</circle>";
      }
    } else {
      std::string d;
      for (const auto& [x, y] : series.points) d += fmt::format("{:.1f},{:.1f} ", X(x), Y(y));
      s += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)",
                       series.color, d);
    }
    if (!series.name.empty()) {
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end" fill="{}">{}</text>)",
                       left + pw - 4, ly, series.color, html_escape(series.name));
      ly += 14;
    }
  }
  return s + "</svg>\n";
}

}  // namespace meshsim
