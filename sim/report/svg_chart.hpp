#pragma once
// Inline-SVG charts for the HTML reports: every chart has an x and a y axis with a title (its
// unit in brackets) and round ticks (1, 2 or 5 × 10^k, from 0), and keeps its labels inside the
// drawing (label widths are estimated at 0.6 em per character, the margins sized from them).
// Classes the report tests read: svg.chart, text.axis-title.x / .y, text.tick.x / .y.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace meshsim {

// Ticks from 0 to the first multiple of `step` at or above the data's maximum.
struct Ticks {
  double step = 1, top = 1;
  std::vector<double> values;  // 0, step, …, top
};
Ticks nice_ticks(double max, int target = 5);
std::string tick_label(double value, double step);

// A display unit for a quantity of `max_seconds`: s, ms or µs, and the factor from seconds.
struct TimeUnit {
  const char* name;
  double per_second;
};
TimeUnit time_unit(double max_seconds);

// The colour of a component (compute, tp, dp, ..., weights, optimizer, ...); one colour per key in
// every chart.
std::string component_color(const std::string& key);
// The i-th colour of a categorical palette (series, TP degrees).
std::string series_color(std::size_t i);

// Horizontal stacked bars, one row per label, segments in `keys` order.
struct BarRow {
  std::string label, tooltip;           // the tooltip adds detail on hover (optional)
  std::map<std::string, double> parts;  // key → value in axis units
};
struct BarChart {
  std::vector<std::string> keys;
  std::vector<BarRow> rows;
  std::string x_title, y_title;  // with units: "time per step (s)"
  std::optional<double> line;    // a vertical reference line (axis units), always drawn
  std::string line_label;
  std::string value_unit;  // printed after each bar's total
};
std::string bar_chart(const BarChart& chart);

// Line and scatter series on linear axes from 0.
struct XYSeries {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
  bool dots = false;              // a scatter of points instead of a polyline
  std::vector<std::string> tips;  // per point, with dots (optional)
};
struct XYChart {
  std::vector<XYSeries> series;
  std::string x_title, y_title;
  std::optional<double> y_max;  // a fixed top (1 for a CDF); else from the data
  // Vertical marker lines (x in axis units, label): the x axis extends to include them.
  std::vector<std::pair<double, std::string>> x_markers;
  double width = 640, height = 240;
};
std::string xy_chart(const XYChart& chart);

// The x axis of a chart whose plot spans [left, left + width] at baseline `y`: ticks, tick
// labels and the title below them. Returns the SVG; `ticks` scales the data.
std::string x_axis(const Ticks& ticks, double left, double width, double y,
                   const std::string& title);
// Legend entries (name, colour) left to right from (x0, y), wrapping at `limit`, appended to
// `svg`; returns the height used.
double legend(std::string& svg, const std::vector<std::pair<std::string, std::string>>& entries,
              double x0, double y, double limit);
// The y axis title, rotated, centred on (x, y).
std::string y_axis_title(double x, double y, const std::string& title);
// Estimated width (px) of `text` at `font_px`.
double text_width(const std::string& text, double font_px);

}  // namespace meshsim
