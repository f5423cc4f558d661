#include "report/report_candidate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace meshsim {

std::vector<CandidateGroup> group_equivalent(const std::vector<ReportCandidate>& ranked) {
  const auto shape = [&](std::size_t i) -> const std::string& {
    return ranked[i].shape.empty() ? ranked[i].label : ranked[i].shape;
  };
  std::vector<CandidateGroup> groups;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const double step = ranked[i].step_s;
    auto joins = [&](const CandidateGroup& g) {
      const auto lead = g.members.front();
      const double d = std::abs(step - ranked[lead].step_s);
      return d <= 1e-9 * ranked[lead].step_s ||
             (shape(lead) == shape(i) && d <= kEquivalentStep * ranked[lead].step_s);
    };
    const auto it = std::find_if(groups.begin(), groups.end(), joins);
    if (it != groups.end())
      it->members.push_back(i);
    else
      groups.push_back({{i}});
  }
  return groups;
}

std::map<std::int64_t, std::size_t> best_per_tp(const std::vector<ReportCandidate>& ranked,
                                                const std::map<std::int64_t, double>& at_least) {
  std::map<std::int64_t, std::size_t> best;
  for (std::size_t i = 0; i < ranked.size(); ++i) best.try_emplace(ranked[i].tp, i);
  for (const auto& [tp, s] : at_least) best.try_emplace(tp, kNoLayout);
  return best;
}

std::string best_per_tp_line(const std::vector<ReportCandidate>& ranked,
                             const std::map<std::int64_t, double>& at_least) {
  std::string line;
  for (const auto& [tp, i] : best_per_tp(ranked, at_least)) {
    line += line.empty() ? "" : ", ";
    const auto far = at_least.find(tp);
    if (far == at_least.end()) {
      const auto& c = ranked[i];
      const auto it = c.exposed_s.find("tp");
      line += fmt::format("tp={} {:.3f} s (exposed tp {:.3f} s)", tp, c.step_s,
                          it == c.exposed_s.end() ? 0.0 : it->second);
    } else if (i != kNoLayout) {
      line += fmt::format("tp={} at least {:.3f} s (best simulated {:.3f} s)", tp, far->second,
                          ranked[i].step_s);
    } else {
      line += fmt::format("tp={} at least {:.3f} s (none simulated)", tp, far->second);
    }
  }
  if (!at_least.empty())
    line +=
        "; \"at least\": its best is beyond reach of the K-th best, so not every layout of that "
        "degree was simulated (--exhaustive finds it)";
  return line;
}

std::string why_winner(const ReportCandidate& a, const ReportCandidate& b, std::size_t rank_b) {
  std::vector<std::pair<double, std::string>> diffs;
  diffs.push_back({b.compute_s - a.compute_s, "compute"});
  diffs.push_back({b.bubble_s - a.bubble_s, "pipeline bubble"});
  if (a.host_wait_s > 0 || b.host_wait_s > 0)
    diffs.push_back({b.host_wait_s - a.host_wait_s, "waiting for the host"});
  for (const auto& [g, v] : a.exposed_s) {
    const auto it = b.exposed_s.find(g);
    diffs.push_back(
        {(it == b.exposed_s.end() ? 0.0 : it->second) - v, "exposed " + g + " communication"});
  }
  std::sort(diffs.begin(), diffs.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  const double gain = b.step_s - a.step_s;
  std::string s = fmt::format("{:.3f} s faster than #{} ({})", gain, rank_b, b.label);
  std::string parts;
  for (const auto& [d, what] : diffs) {
    if (d <= 1e-4 * b.step_s) continue;
    if (!parts.empty()) parts += ", ";
    parts += fmt::format("{:.3f} s less {}", d, what);
    if (parts.size() > 120) break;
  }
  if (!parts.empty()) s += ": " + parts;
  for (const auto& [d, what] : diffs)
    if (d < -1e-4 * b.step_s) s += fmt::format("; it pays {:.3f} s more {}", -d, what);
  return s;
}

std::vector<std::size_t> pareto_front(const std::vector<ReportCandidate>& c) {
  std::vector<std::size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return c[x].step_s != c[y].step_s ? c[x].step_s < c[y].step_s
                                      : c[x].memory.total() < c[y].memory.total();
  });
  std::vector<std::size_t> front;
  double best_memory = INFINITY;
  for (auto i : order)
    if (c[i].memory.total() < best_memory) {
      front.push_back(i);
      best_memory = c[i].memory.total();
    }
  return front;
}

ReportCandidate report_candidate(const std::string& label, std::int64_t tp,
                                 const TrainingResult& r) {
  ReportCandidate c;
  c.label = label;
  c.tp = tp;
  c.step_s = r.step_time_s;
  c.tokens_per_s = r.tokens_per_s;
  c.tokens_per_s_per_gpu = r.tokens_per_s_per_gpu;
  c.compute_s = r.compute_s;
  c.interference_s = r.interference_s;
  c.comm_interference_s = r.comm_interference_s;
  c.bubble_s = r.bubble_s;
  c.host_wait_s = r.host_wait_s;
  c.mfu = r.mfu;
  c.exposed_s = r.exposed_comm_s;
  c.memory = r.memory;
  return c;
}

std::vector<ReportCandidate> report_candidates(const std::vector<EvaluatedCandidate>& results) {
  std::vector<ReportCandidate> out;
  for (const auto& e : results) {
    if (!e.error.empty()) break;
    auto c = report_candidate(e.candidate.label(), e.candidate.config.mesh.tp, e.result);
    auto shape = e.candidate;
    shape.config.zero = 0;
    shape.config.mesh.fsdp = 0;
    c.shape = shape.label();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace meshsim
