#include "network/max_min_fair.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>

namespace meshsim {

MaxMinSolver::MaxMinSolver(std::size_t link_count, std::size_t few_flows)
    : few_flows_(few_flows),
      residual_(link_count, 0.0),
      unfrozen_(link_count, 0.0),
      version_(link_count, 0),
      on_link_(link_count) {}

void MaxMinSolver::solve(std::span<const std::uint32_t> flows,
                         const std::vector<FlowLinks>& flow_links,
                         const std::vector<double>& capacity, std::vector<double>& rates) {
  touched_.clear();
  for (auto f : flows) {
    rates[f] = -1.0;  // not yet frozen
    for (const auto& u : flow_links[f]) {
      if (on_link_[u.link].empty()) {
        touched_.push_back(u.link);
        residual_[u.link] = capacity[u.link];
        unfrozen_[u.link] = 0.0;
      }
      on_link_[u.link].push_back(f);
      unfrozen_[u.link] += u.weight;
    }
  }
  for (auto f : flows)
    if (flow_links[f].empty()) rates[f] = std::numeric_limits<double>::infinity();
  if (flows.size() <= few_flows_) {
    // Few flows over many links (a collective's channels): each round scans the links for the
    // smallest fair share; there are at most as many rounds as flows, and no heap churn.
    for (;;) {
      double share = std::numeric_limits<double>::infinity();
      std::uint32_t bottleneck = 0;
      for (auto l : touched_)
        if (unfrozen_[l] > 1e-9 && residual_[l] / unfrozen_[l] < share) {
          share = residual_[l] / unfrozen_[l];
          bottleneck = l;
        }
      if (!std::isfinite(share)) break;
      for (auto f : on_link_[bottleneck]) {
        if (rates[f] >= 0.0) continue;
        rates[f] = share;
        for (const auto& u : flow_links[f]) {
          residual_[u.link] = std::max(0.0, residual_[u.link] - share * u.weight);
          unfrozen_[u.link] = std::max(0.0, unfrozen_[u.link] - u.weight);
        }
      }
      unfrozen_[bottleneck] = 0.0;
    }
    for (auto l : touched_) on_link_[l].clear();
    for (auto f : flows)
      if (rates[f] < 0.0) throw std::logic_error("max-min solver left a flow unrated");
    return;
  }
  // Min-heap of (fair share, link, version); stale entries are skipped when popped. Ties break
  // on the link id, so the result never depends on container order.
  using Item = std::tuple<double, std::uint32_t, std::uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (auto l : touched_) heap.emplace(residual_[l] / unfrozen_[l], l, ++version_[l]);
  while (!heap.empty()) {
    const auto [share, link, version] = heap.top();
    heap.pop();
    if (version != version_[link] || !(unfrozen_[link] > 0.0)) continue;
    for (auto f : on_link_[link]) {
      if (rates[f] >= 0.0) continue;  // frozen earlier by another bottleneck
      rates[f] = share;
      for (const auto& u : flow_links[f]) {
        residual_[u.link] = std::max(0.0, residual_[u.link] - share * u.weight);
        unfrozen_[u.link] -= u.weight;
        // Weights are sums of fractions: treat what rounding leaves behind as nothing.
        if (unfrozen_[u.link] > 1e-9)
          heap.emplace(residual_[u.link] / unfrozen_[u.link], u.link, ++version_[u.link]);
        else
          unfrozen_[u.link] = 0.0;
      }
    }
  }
  for (auto l : touched_) on_link_[l].clear();
  for (auto f : flows)
    if (rates[f] < 0.0) throw std::logic_error("max-min solver left a flow unrated");
}

std::vector<double> solve_max_min(const FairShareInput& input) {
  MaxMinSolver solver(input.capacity.size());
  std::vector<std::uint32_t> all(input.flows.size());
  for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<double> rates(input.flows.size(), 0.0);
  solver.solve(all, input.flows, input.capacity, rates);
  return rates;
}

}  // namespace meshsim
