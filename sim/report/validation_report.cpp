#include "report/validation_report.hpp"

#include <fmt/format.h>

namespace meshsim {

std::map<std::string, GroupError> mape_by_group(const std::vector<ValidationRow>& rows) {
  std::map<std::string, GroupError> out;
  for (const auto& r : rows) {
    auto& g = out[r.group];
    g.mape += std::abs(r.error());
    ++g.cases;
  }
  for (auto& [name, g] : out) g.mape /= g.cases;
  return out;
}

bool outside_tolerance(const ValidationRow& row) {
  return row.tolerance > 0 && std::abs(row.error()) > row.tolerance;
}

std::string validation_text(const std::vector<ValidationRow>& rows, const std::string& source) {
  std::string out = fmt::format(
      "# meshsim validate: {} comparisons from {} (nothing fitted to them)\n", rows.size(), source);
  out += fmt::format("{:<22} {:<40} {:<20} {:>12} {:>12} {:>8}\n", "group", "case", "metric",
                     "measured", "simulated", "error");
  for (const auto& r : rows)
    out += fmt::format("{:<22} {:<40} {:<20} {:>12.4g} {:>12.4g} {:>+7.1f}%{}\n", r.group, r.name,
                       r.metric, r.measured, r.simulated, 100 * r.error(),
                       !r.known_gap.empty()   ? "  known gap"
                       : outside_tolerance(r) ? "  outside tolerance"
                                              : "");
  out += fmt::format("\n{:<24} {:>6} {:>8}\n", "group", "cases", "MAPE");
  for (const auto& [g, e] : mape_by_group(rows))
    out += fmt::format("{:<24} {:>6} {:>7.1f}%\n", g, e.cases, 100 * e.mape);
  return out;
}

Json validation_json(const std::vector<ValidationRow>& rows) {
  Json cases = Json::array();
  for (const auto& r : rows) {
    Json c = {{"group", r.group},   {"name", r.name},         {"metric", r.metric},
              {"unit", r.unit},     {"measured", r.measured}, {"simulated", r.simulated},
              {"error", r.error()}, {"detail", r.detail}};
    if (r.tolerance > 0) {
      c["tolerance"] = r.tolerance;
      c["within_tolerance"] = !outside_tolerance(r);
    }
    if (!r.known_gap.empty()) c["known_gap"] = r.known_gap;
    cases.push_back(c);
  }
  Json m = Json::object();
  for (const auto& [g, e] : mape_by_group(rows)) m[g] = e.mape;
  return Json{{"cases", cases}, {"mape", m}};
}

}  // namespace meshsim
