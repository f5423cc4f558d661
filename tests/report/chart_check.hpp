#pragma once
// The chart-axes check of the HTML reports (issue 18): every <svg> is a chart with an x and a y
// axis title, at least two x ticks at 0, s, 2s, … with s = 1, 2 or 5 × 10^k (y ticks likewise
// when there are any), and no horizontal label whose extent (0.6 em per character, the estimate
// the charts lay out with) leaves the drawing. Returns one line per problem.
#include <cmath>
#include <regex>
#include <string>
#include <vector>

namespace meshsim::test {

inline std::string attr(const std::string& tag, const std::string& name) {
  const std::regex re("\\s" + name + "=\"([^\"]*)\"");
  std::smatch m;
  return std::regex_search(tag, m, re) ? m[1].str() : std::string();
}

inline bool round_step(double step) {
  if (!(step > 0)) return false;
  const double mag = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double f = step / mag;
  for (double ok : {1.0, 2.0, 5.0, 10.0})
    if (std::abs(f - ok) < 1e-6 * ok) return true;
  return false;
}

// Tick labels (class "tick AXIS") of one chart, as numbers.
inline std::vector<double> ticks(const std::string& svg, const std::string& axis) {
  std::vector<double> v;
  const std::regex re("<text class=\"tick " + axis + "\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it)
    v.push_back(std::stod((*it)[1].str()));
  return v;
}

inline std::string tick_problem(const std::vector<double>& t, const std::string& axis) {
  if (t.size() < 2) return axis + " axis has fewer than two ticks";
  if (t.front() != 0) return axis + " axis does not start at 0";
  const double step = t[1] - t[0];
  if (!round_step(step)) return axis + " axis step " + std::to_string(step) + " is not round";
  for (std::size_t i = 1; i < t.size(); ++i)
    if (std::abs(t[i] - t[i - 1] - step) > 1e-6 * std::max(step, t[i]))
      return axis + " axis ticks are not evenly spaced";
  return "";
}

inline std::vector<std::string> chart_problems(const std::string& html) {
  std::vector<std::string> out;
  std::size_t n = 0;
  for (auto p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) {
    const auto end = html.find("</svg>", p);
    const std::string svg = html.substr(p, end - p);
    const std::string where = "chart " + std::to_string(++n) + ": ";
    const std::string open = svg.substr(0, svg.find('>'));
    if (attr(open, "class") != "chart") out.push_back(where + "not a chart (class=\"chart\")");
    for (const std::string axis : {"x", "y"}) {
      const std::regex title("<text class=\"axis-title " + axis + "\"[^>]*>([^<]+)</text>");
      if (!std::regex_search(svg, title)) out.push_back(where + "no " + axis + " axis title");
    }
    if (auto e = tick_problem(ticks(svg, "x"), "x"); !e.empty()) out.push_back(where + e);
    if (const auto y = ticks(svg, "y"); !y.empty())
      if (auto e = tick_problem(y, "y"); !e.empty()) out.push_back(where + e);
    // Labels inside the drawing.
    const double width = std::stod(attr(open, "width"));
    const std::regex text_re("<text([^>]*)>([^<]*)</text>");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text_re);
         it != std::sregex_iterator(); ++it) {
      const std::string tag = (*it)[1].str(), body = (*it)[2].str();
      if (!attr(tag, "transform").empty() || attr(tag, "x").empty()) continue;
      const std::string fs = attr(tag, "font-size");
      const double font =
          fs.empty() ? std::stod(attr(open, "font-size").empty() ? "11" : attr(open, "font-size"))
                     : std::stod(fs);
      std::size_t chars = 0;
      for (std::size_t i = 0; i < body.size(); ++i) {
        if ((static_cast<unsigned char>(body[i]) & 0xC0) == 0x80) continue;
        if (body[i] == '&') i = body.find(';', i);  // an entity is one character
        ++chars;
      }
      const double w = 0.6 * font * static_cast<double>(chars), x = std::stod(attr(tag, "x"));
      const std::string anchor = attr(tag, "text-anchor");
      const double x0 = anchor == "end" ? x - w : anchor == "middle" ? x - w / 2 : x;
      if (x0 < -0.5 || x0 + w > width + 0.5)
        out.push_back(where + "label '" + body + "' leaves the drawing");
    }
  }
  return out;
}

}  // namespace meshsim::test
