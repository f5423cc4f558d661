#include "network/max_min_fair.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>

namespace meshsim {

MaxMinSolver::MaxMinSolver(std::size_t link_count, std::size_t few_flows)
    : few_flows_(few_flows),
      residual_(link_count, 0.0),
      unfrozen_(link_count, 0.0),
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
  // Flows still to rate, each once (a flow listed twice loads its links twice, one rate).
  std::size_t unrated = 0;
  for (auto f : flows) {
    if (rates[f] != -1.0) continue;
    if (flow_links[f].empty()) {
      rates[f] = std::numeric_limits<double>::infinity();
    } else {
      rates[f] = -2.0;  // counted, not yet frozen
      ++unrated;
    }
  }
  // Freezes the unfrozen flows on `bottleneck` at `share`. Once every flow has its rate the
  // remaining links need not be looked at (a DP ring over a whole fabric touches ~90,000 links
  // and freezes at a few dozen bottlenecks).
  const auto freeze = [&](std::uint32_t bottleneck, double share) {
    for (auto f : on_link_[bottleneck]) {
      if (rates[f] >= 0.0) continue;  // frozen earlier by another bottleneck
      rates[f] = share;
      --unrated;
      for (const auto& u : flow_links[f]) {
        residual_[u.link] = std::max(0.0, residual_[u.link] - share * u.weight);
        unfrozen_[u.link] = std::max(0.0, unfrozen_[u.link] - u.weight);
      }
    }
    unfrozen_[bottleneck] = 0.0;
  };
  if (flows.size() <= few_flows_) {
    // Few flows over many links (a collective's channels): each round scans the links for the
    // smallest fair share; there are at most as many rounds as flows, and no heap.
    while (unrated > 0) {
      double share = std::numeric_limits<double>::infinity();
      std::uint32_t bottleneck = 0;
      for (auto l : touched_)
        if (unfrozen_[l] > 1e-9 && residual_[l] / unfrozen_[l] < share) {
          share = residual_[l] / unfrozen_[l];
          bottleneck = l;
        }
      if (!std::isfinite(share)) break;
      freeze(bottleneck, share);
    }
  } else {
    // Min-heap of (fair share, link). A link's fair share never falls as flows freeze: a flow
    // frozen at the round's share r <= R/U leaves (R - r w)/(U - w) >= R/U. So an entry pushed
    // earlier is a lower bound on the link's share now, and a link is pushed again only when its
    // entry reaches the top stale, not at every change (a ring flow crosses thousands of links;
    // pushing each of them at each freeze was most of a 100,000-GPU step). An entry popped at
    // its current share is the smallest share left; ties break on the order the flows first
    // touched the links, as the scan above does, so the rates depend on the flows and their
    // link lists, never on link ids (run_signature relies on it).
    using Item = std::pair<double, std::uint32_t>;  // share, index in touched_
    std::vector<Item> items;
    items.reserve(touched_.size());
    for (std::uint32_t i = 0; i < touched_.size(); ++i)
      items.emplace_back(residual_[touched_[i]] / unfrozen_[touched_[i]], i);
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap(std::greater<>{},
                                                                      std::move(items));
    while (unrated > 0 && !heap.empty()) {
      const auto [entry, index] = heap.top();
      heap.pop();
      const auto link = touched_[index];
      if (!(unfrozen_[link] > 1e-9)) continue;  // every flow on it frozen (rounding aside)
      const double share = residual_[link] / unfrozen_[link];
      if (share > entry)
        heap.emplace(share, index);
      else
        freeze(link, share);
    }
  }
  for (auto l : touched_) on_link_[l].clear();
  if (unrated > 0) throw std::logic_error("max-min solver left a flow unrated");
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
