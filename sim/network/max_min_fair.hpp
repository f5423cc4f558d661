#pragma once
// Max-min fair sharing of link capacities among flows, by progressive filling (Bertsekas &
// Gallager, Data Networks, §6.5.2): raise every unfrozen flow's rate together; when a link fills,
// freeze the flows crossing it at its fair share; repeat on the residual capacities.
// Flows may use a link with a weight: a pipelined ring moves its bytes over every edge of the ring
// at one rate, so it is one flow whose weight on a link is how many of its edges cross that link
// (fractions where NVLink striping splits an edge over several planes). A link of capacity c
// then satisfies sum(weight × rate) <= c (weighted max-min; Bertsekas & Gallager §6.5.2).
// This is the pure solver; FlowNetwork calls it on the connected set of links a change touches.
#include <cstdint>
#include <span>
#include <vector>

namespace meshsim {

struct LinkUse {
  std::uint32_t link = 0;
  double weight = 1.0;  // > 0
  auto operator<=>(const LinkUse&) const = default;
};
using FlowLinks = std::vector<LinkUse>;  // each link at most once

struct FairShareInput {
  std::vector<double> capacity;  // per link, bytes/s
  std::vector<FlowLinks> flows;  // links used by each flow
};

// Rate of each flow in bytes/s. A flow that crosses no link gets +infinity.
std::vector<double> solve_max_min(const FairShareInput& input);

// The same on a subset: `flows` index into `flow_links`; capacities by global link id. Writes
// rates[f] for each f in `flows`. Scratch vectors are sized to the link count by the caller and
// left as they were found, so repeated calls cost only the subset's size.
class MaxMinSolver {
 public:
  // Up to `few_flows` flows are solved by scanning links each round (cheap for a collective's
  // handful of channels over thousands of links); more use a heap of link shares. Both give the
  // same rates.
  explicit MaxMinSolver(std::size_t link_count, std::size_t few_flows = 32);
  void solve(std::span<const std::uint32_t> flows, const std::vector<FlowLinks>& flow_links,
             const std::vector<double>& capacity, std::vector<double>& rates);

 private:
  std::size_t few_flows_;
  std::vector<double> residual_;
  std::vector<double> unfrozen_;                     // summed weight of unfrozen flows per link
  std::vector<std::vector<std::uint32_t>> on_link_;  // flows (of this solve) per link
  std::vector<std::uint32_t> touched_;
};

}  // namespace meshsim
