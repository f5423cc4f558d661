#include "topology/bisection.hpp"

#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <vector>

namespace meshsim {

double bisection_Bps(const Topology& topo) {
  const auto& gpus = topo.gpus();
  if (gpus.size() < 2) return 0.0;
  // Boost's push-relabel on integer capacities in MB/s (exact arithmetic; 1e6 B/s resolution is
  // far below any link here).
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<
          boost::edge_capacity_t, std::int64_t,
          boost::property<boost::edge_residual_capacity_t, std::int64_t,
                          boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const std::size_t n = topo.vertex_count();
  FlowGraph fg(n + 2);
  const auto source = n, sink = n + 1;
  auto capacity = boost::get(boost::edge_capacity, fg);
  auto reverse = boost::get(boost::edge_reverse, fg);
  auto add = [&](std::size_t a, std::size_t b, std::int64_t cap) {
    auto e = boost::add_edge(a, b, fg).first;
    auto r = boost::add_edge(b, a, fg).first;
    capacity[e] = cap;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
  };
  const auto& g = topo.graph();
  // A GPU's source (sink) edge carries what its own links can send (receive): no flow can use
  // more, so the cut is unchanged, and unlike one huge "infinite" capacity the preflow's sums
  // stay bounded by the cluster's total capacity (2^50 per GPU overflowed int64 at 16,384 GPUs,
  // which clang's UBSan reports inside Boost's push-relabel).
  std::vector<std::int64_t> out_MBps(n, 0), in_MBps(n, 0);
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const auto cap = static_cast<std::int64_t>(std::llround(g[*e].bandwidth_Bps / 1e6));
    add(boost::source(*e, g), boost::target(*e, g), cap);
    out_MBps[boost::source(*e, g)] += cap;
    in_MBps[boost::target(*e, g)] += cap;
  }
  const std::size_t half = gpus.size() / 2;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (i < half)
      add(source, gpus[i], out_MBps[gpus[i]]);
    else
      add(gpus[i], sink, in_MBps[gpus[i]]);
  }
  const auto flow = boost::push_relabel_max_flow(fg, source, sink);
  return static_cast<double>(flow) * 1e6;
}

}  // namespace meshsim
