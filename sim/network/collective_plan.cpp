#include "network/collective_plan.hpp"

#include <cmath>
#include <map>

#include "topology/path_class.hpp"

namespace meshsim {
namespace {

struct Planner {
  const Topology& topo;
  Router& router;
  const CollectiveCall& call;
  CollectiveAlgo algo;
  Protocol protocol;
  GroupLayout layout;
  double wire;  // 1 / protocol efficiency
  bool with_flows;
  // Plans do not nest, so each thread's planner reuses one link array (zeroing a fresh one per
  // plan was ~20 % of a folded 405B step on 16,384 GPUs).
  UsageBuilder& usage = scratch_usage_builder(with_flows ? topo.directed_edge_count() : 0);

  std::int32_t node_of(std::int32_t gpu) const {
    return topo.vertex(topo.gpus()[static_cast<std::size_t>(gpu)]).node;
  }
  std::int32_t local_of(std::int32_t gpu) const {
    return topo.vertex(topo.gpus()[static_cast<std::size_t>(gpu)]).local;
  }
  // The GPU with local index `local` in `node` (nodes are uniform in parametric clusters; for
  // explicit ones fall back to a scan).
  std::optional<std::int32_t> gpu_at(std::int32_t node, std::int32_t local) const {
    const auto gpn = topo.gpus_per_node();
    if (gpn > 0) {
      const auto g = node * gpn + local;
      if (g >= 0 && static_cast<std::size_t>(g) < topo.gpu_count() && node_of(g) == node &&
          local_of(g) == local)
        return g;
    }
    for (std::size_t g = 0; g < topo.gpu_count(); ++g) {
      const auto gi = static_cast<std::int32_t>(g);
      if (node_of(gi) == node && local_of(gi) == local) return gi;
    }
    return std::nullopt;
  }

  // Adds the links of a→b with `weight`. Across nodes and rails the hop goes through the NVLink
  // peer on b's rail (PXN): the usage of the two legs adds up, since each leg's path fractions
  // sum to one.
  void add_hop(std::int32_t a, std::int32_t b, double weight) {
    if (!with_flows) return;
    if (node_of(a) != node_of(b) && local_of(a) != local_of(b)) {
      if (auto via = gpu_at(node_of(a), local_of(b)); via && *via != a) {
        const Route& first = router.gpu_route(a, *via);
        if (classify(topo, first) == PathClass::NVL) {
          usage.add(first.paths, weight);
          usage.add(router.gpu_route(*via, b).paths, weight);
          return;
        }
      }
    }
    usage.add(router.gpu_route(a, b).paths, weight);
  }

  // An independent point-to-point flow.
  PlannedFlow flow(std::int32_t a, std::int32_t b, double payload) {
    add_hop(a, b, 1.0);
    return take(payload);
  }
  // A coupled (pipelined) flow is built by edge() calls carrying `weight` units of its bytes,
  // then taken with its payload bytes per unit.
  void edge(std::int32_t a, std::int32_t b, double weight = 1.0) { add_hop(a, b, weight); }
  PlannedFlow take(double payload) { return PlannedFlow{usage.take(), payload * wire}; }

  std::size_t nodes() const { return layout.per_node.size(); }

  Time latency_us(double us) const { return Time::from_seconds_ceil(us * 1e-6); }
  double hop(HopClass h) const { return nccl_hop_latency_us(algo, protocol, h); }
  double base() const { return nccl_base_latency_us(algo, protocol); }

  // Ring latency with `steps` steps of which `inter` cross nodes (reference/network-model.md).
  double ring_latency(double steps, double inter) const {
    return base() + (steps - inter) * hop(layout.intra) + inter * hop(HopClass::network);
  }

  // Channel c's ring: every node's members rotated by c, nodes in order.
  std::vector<std::int32_t> ring_order(std::size_t c) const {
    std::vector<std::int32_t> order;
    for (const auto& members : layout.per_node)
      for (std::size_t j = 0; j < members.size(); ++j)
        order.push_back(members[(c + j) % members.size()]);
    return order;
  }
  std::size_t channels() const {
    return nodes() > 1 && layout.ranks_per_node > 0
               ? static_cast<std::size_t>(layout.ranks_per_node)
               : 1;
  }
};

}  // namespace

GroupLayout layout_of(const Topology& topo, Router& router,
                      const std::vector<std::int32_t>& ranks) {
  GroupLayout g;
  std::map<std::int32_t, std::size_t> index;
  for (auto r : ranks) {
    const auto node = topo.vertex(topo.gpus()[static_cast<std::size_t>(r)]).node;
    auto [it, fresh] = index.emplace(node, g.per_node.size());
    if (fresh) g.per_node.emplace_back();
    g.per_node[it->second].push_back(r);
  }
  g.ranks_per_node = static_cast<std::int32_t>(g.per_node.front().size());
  for (const auto& m : g.per_node)
    if (m.size() != g.per_node.front().size()) g.ranks_per_node = 0;
  // Worst intra-node class and NVSwitch presence, from one representative node.
  bool nvswitch = true, any_pair = false;
  const auto& m = g.per_node.front();
  for (std::size_t i = 0; i < m.size(); ++i)
    for (std::size_t j = 0; j < m.size(); ++j) {
      if (i == j) continue;
      any_pair = true;
      const Route& r = router.gpu_route(m[i], m[j]);
      if (classify(topo, r) != PathClass::NVL) g.intra = HopClass::pcie;
      bool crosses = false;
      for (const auto& p : r.paths)
        for (auto e : p.edges)
          crosses = crosses || topo.vertex(boost::target(topo.edge(e), topo.graph())).kind ==
                                   VertexKind::nvswitch;
      nvswitch = nvswitch && crosses;
    }
  g.nvswitch = any_pair && nvswitch;
  return g;
}

std::optional<CollectivePlan> plan_collective(const Topology& topo, Router& router,
                                              const CollectiveCall& call, CollectiveAlgo algo,
                                              Protocol protocol, std::string* why_not,
                                              bool with_flows) {
  if (call.ranks.empty()) {
    if (why_not) *why_not = "empty group";
    return std::nullopt;
  }
  return plan_collective(topo, router, call, layout_of(topo, router, call.ranks), algo, protocol,
                         why_not, with_flows);
}

std::optional<CollectivePlan> plan_collective(const Topology& topo, Router& router,
                                              const CollectiveCall& call, const GroupLayout& layout,
                                              CollectiveAlgo algo, Protocol protocol,
                                              std::string* why_not, bool with_flows) {
  auto no = [&](const char* why) -> std::optional<CollectivePlan> {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  if (call.ranks.empty()) return no("empty group");
  Planner p{
      topo,      router, call, algo, protocol, layout, 1.0 / protocol_efficiency(algo, protocol),
      with_flows};
  const auto n = call.ranks.size();
  const double nd = static_cast<double>(n);
  const double S = call.bytes;
  const double N = static_cast<double>(p.nodes());
  CollectivePlan plan{algo, protocol, Time::zero(), p.wire, {}};
  if (n == 1) {  // nothing moves; NCCL returns after its launch latency
    plan.latency = p.latency_us(p.base());
    return plan;
  }
  if (protocol == Protocol::ll128 && p.layout.intra == HopClass::pcie)
    return no("LL128 needs NVLink inside the node (NCCL enables it only there)");
  const auto op = call.op;
  std::vector<PlannedFlow> phase;
  // Every rank sends S/n to every other at once, one hop's latency.
  const auto direct_all_to_all = [&] {
    for (auto a : call.ranks)
      for (auto b : call.ranks)
        if (a != b) phase.push_back(p.flow(a, b, S / nd));
    const HopClass worst = p.nodes() > 1 ? HopClass::network : p.layout.intra;
    plan.latency = p.latency_us(p.base() + p.hop(worst));
    plan.phases.push_back(std::move(phase));
    return std::optional<CollectivePlan>(std::move(plan));
  };

  switch (algo) {
    case CollectiveAlgo::ring: {
      if (op == CollectiveOp::all_to_all || op == CollectiveOp::send_recv)
        return no("ring applies to all_reduce, all_gather, reduce_scatter, broadcast, reduce");
      const auto C = p.channels();
      double per_edge = 0, steps = 0, inter = 0;
      switch (op) {
        case CollectiveOp::all_reduce:
          per_edge = 2.0 * (nd - 1) / nd * S;
          steps = 2.0 * (nd - 1);
          inter = 2.0 * (N - 1);
          break;
        case CollectiveOp::all_gather:
        case CollectiveOp::reduce_scatter:
          per_edge = (nd - 1) / nd * S;
          steps = nd - 1;
          inter = N - 1;
          break;
        default:  // broadcast, reduce: a pipelined chain along the ring
          per_edge = S;
          steps = nd - 1;
          inter = N - 1;
          break;
      }
      const bool chain = op == CollectiveOp::broadcast || op == CollectiveOp::reduce;
      for (std::size_t c = 0; c < C; ++c) {
        const auto order = p.ring_order(c);
        // A chain starts at the root (ranks[0]); reduce flows toward it, so reverse direction.
        std::size_t root = 0;
        while (order[root] != call.ranks.front()) ++root;
        for (std::size_t i = 0; i < n; ++i) {
          if (chain && (i + 1) % n == root) continue;  // the chain's last rank sends nowhere
          auto a = order[i], b = order[(i + 1) % n];
          if (op == CollectiveOp::reduce) std::swap(a, b);
          p.edge(a, b);
        }
        phase.push_back(p.take(per_edge / static_cast<double>(C)));
      }
      plan.latency = p.latency_us(p.ring_latency(steps, inter));
      plan.phases.push_back(std::move(phase));
      return plan;
    }

    case CollectiveAlgo::nvls: {
      if (p.nodes() != 1)
        return no("NVLS here is intra-node only (NVLS-tree across nodes is not modelled)");
      if (!p.layout.nvswitch || !topo.gpu.nvls)
        return no("NVLS needs NVSwitch and a Hopper-or-later GPU");
      if (protocol != Protocol::simple) return no("NVLS uses the Simple protocol only");
      double up = 0, down = 0;  // payload per GPU toward / from the switches
      switch (op) {
        case CollectiveOp::all_reduce:  // reduce-scatter by multimem loads, then multicast stores
          up = down = (1.0 + 1.0 / nd) * S;
          plan.latency = p.latency_us(p.base() + 2 * p.hop(HopClass::nvlink));
          break;
        case CollectiveOp::all_gather:
          up = S / nd;
          down = (nd - 1) / nd * S;
          plan.latency = p.latency_us(p.base() + p.hop(HopClass::nvlink));
          break;
        case CollectiveOp::reduce_scatter:
          up = (nd - 1) / nd * S;
          down = S / nd;
          plan.latency = p.latency_us(p.base() + p.hop(HopClass::nvlink));
          break;
        default:
          return no("NVLS applies to all_reduce, all_gather, reduce_scatter");
      }
      // One coupled flow of S bytes; each GPU's links to the switches carry up/S and down/S of
      // it, striped evenly over the switch planes.
      const auto& g = topo.graph();
      for (auto r : with_flows ? call.ranks : std::vector<std::int32_t>{}) {
        const VertexId v = topo.gpus()[static_cast<std::size_t>(r)];
        std::vector<std::uint32_t> planes;
        for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
          if (topo.vertex(boost::target(*e, g)).kind == VertexKind::nvswitch)
            planes.push_back(g[*e].id);
        const double k = static_cast<double>(planes.size());
        for (auto id : planes) {
          p.usage.add(id, up / S / k);
          p.usage.add(id ^ 1u, down / S / k);  // the reverse direction
        }
      }
      phase.push_back(p.take(S));
      plan.phases.push_back(std::move(phase));
      return plan;
    }

    case CollectiveAlgo::tree: {
      if (op != CollectiveOp::all_reduce) return no("tree applies to all_reduce");
      if (p.nodes() < 2) return no("tree is an inter-node algorithm (one node uses ring or NVLS)");
      if (p.layout.ranks_per_node == 0) return no("tree needs the same ranks on every node");
      const auto C = p.channels();
      const auto ppn = static_cast<std::size_t>(p.layout.ranks_per_node);
      const double per_tree = S / 2.0 / static_cast<double>(C);  // two trees per channel
      const auto nodes = p.nodes();
      for (std::size_t c = 0; c < C; ++c) {
        // One coupled flow per channel, in units of one tree's bytes (per_tree).
        std::vector<std::int32_t> head(nodes);
        for (std::size_t k = 0; k < nodes; ++k) {
          const auto& m = p.layout.per_node[k];
          head[k] = m[c % ppn];
          // Intra-node chain from the head: reduce up it and broadcast down it, for both trees.
          for (std::size_t j = 0; j + 1 < ppn; ++j) {
            const auto a = m[(c + j) % ppn], b = m[(c + j + 1) % ppn];
            p.edge(a, b, 2.0);
            p.edge(b, a, 2.0);
          }
        }
        // Double binary tree over nodes: tree 0 in heap order, tree 1 mirrored, so a node that
        // is interior in one is a leaf in the other (NCCL's double binary tree).
        for (int t = 0; t < 2; ++t)
          for (std::size_t k = 1; k < nodes; ++k) {
            const auto parent = (k - 1) / 2;
            const auto child_node = t == 0 ? k : nodes - 1 - k;
            const auto parent_node = t == 0 ? parent : nodes - 1 - parent;
            p.edge(head[child_node], head[parent_node]);  // reduce
            p.edge(head[parent_node], head[child_node]);  // broadcast
          }
        phase.push_back(p.take(per_tree));
      }
      const double lat = p.base() + 2 * ((static_cast<double>(ppn) - 1) * p.hop(p.layout.intra) +
                                         std::log2(N) * p.hop(HopClass::network));
      plan.latency = p.latency_us(lat);
      plan.phases.push_back(std::move(phase));
      return plan;
    }

    case CollectiveAlgo::hierarchical: {
      if (op == CollectiveOp::all_to_all) {
        if (!(call.network_share < 1.0))
          return no("hierarchical all_to_all is a deduplicating dispatcher's (network share < 1)");
        if (p.nodes() < 2 || p.layout.ranks_per_node == 0) {
          // On one node DeepEP runs its intranode kernel, every copy over NVLink; a group with
          // different ranks per node is not forwarded on rails (the trace builder gives such a
          // group the plain all-to-all; a folded copy of another group's layout lands here).
          // Both are the direct all-to-all.
          return direct_all_to_all();
        }
        // DeepEP's internode dispatch (and its combine, reversed): rank j sends each token once
        // to every node holding one of its experts, to that node's rank j (the same rail), which
        // forwards it over NVLink to the ranks holding them; the RDMA sends and NVLink forwards
        // run at once in one kernel. Every rank sends a plain all-to-all's S/n to each remote
        // rank, so ppn·S/n to a remote node, of which `network_share` crosses the network; the
        // forwarder then delivers S/n to each local rank from each node (its own included).
        const auto ppn = p.layout.ranks_per_node;
        const double per_node = S * static_cast<double>(ppn) / nd;
        for (std::size_t a = 0; a < p.nodes(); ++a)
          for (std::size_t b = 0; b < p.nodes(); ++b)
            if (a != b)
              for (std::int32_t j = 0; j < ppn; ++j)
                phase.push_back(p.flow(p.layout.per_node[a][static_cast<std::size_t>(j)],
                                       p.layout.per_node[b][static_cast<std::size_t>(j)],
                                       per_node * call.network_share));
        for (const auto& m : p.layout.per_node)
          for (auto from : m)
            for (auto to : m)
              if (from != to) phase.push_back(p.flow(from, to, S / nd * N));
        plan.latency = p.latency_us(p.base() + p.hop(HopClass::network) + p.hop(p.layout.intra));
        plan.phases.push_back(std::move(phase));
        return plan;
      }
      if (op != CollectiveOp::all_reduce) return no("hierarchical applies to all_reduce");
      if (p.nodes() < 2) return no("hierarchical needs several nodes");
      if (p.layout.ranks_per_node == 0)
        return no("hierarchical needs the same ranks on every node");
      const auto ppn = static_cast<std::size_t>(p.layout.ranks_per_node);
      const double g = static_cast<double>(ppn);
      // Phases 1 and 3: ring reduce-scatter, then all-gather, inside each node over S bytes. The
      // two move the same bytes over the same links, so one flow set serves both.
      std::vector<PlannedFlow> intra;
      if (ppn > 1)
        for (const auto& m : p.layout.per_node) {
          for (std::size_t j = 0; j < ppn; ++j) p.edge(m[j], m[(j + 1) % ppn]);
          intra.push_back(p.take((g - 1) / g * S));
        }
      // Phase 2: per-rail ring all-reduce across nodes of each rank's S/ppn shard.
      std::vector<PlannedFlow> inter;
      for (std::size_t j = 0; j < ppn; ++j) {
        for (std::size_t k = 0; k < p.nodes(); ++k)
          p.edge(p.layout.per_node[k][j], p.layout.per_node[(k + 1) % p.nodes()][j]);
        inter.push_back(p.take(2.0 * (N - 1) / N * S / g));
      }
      if (!intra.empty()) plan.phases.push_back(intra);
      plan.phases.push_back(std::move(inter));
      if (!intra.empty()) plan.phases.push_back(std::move(intra));
      const double intra_lat = ppn > 1 ? p.base() + (g - 1) * p.hop(p.layout.intra) : 0.0;
      const double inter_lat = p.base() + 2 * (N - 1) * p.hop(HopClass::network);
      plan.latency = p.latency_us(2 * intra_lat + inter_lat);
      return plan;
    }

    case CollectiveAlgo::direct: {
      if (op == CollectiveOp::all_to_all && call.network_share < 1.0)
        return no("a deduplicating dispatch (network share < 1) runs hierarchical");
      if (op == CollectiveOp::all_to_all) return direct_all_to_all();
      if (op != CollectiveOp::send_recv) return no("direct applies to all_to_all and send_recv");
      // nccl-tests sendrecv: every rank sends S to the next and receives S from the previous.
      for (std::size_t i = 0; i < n; ++i)
        phase.push_back(p.flow(call.ranks[i], call.ranks[(i + 1) % n], S));
      const HopClass worst = p.nodes() > 1 ? HopClass::network : p.layout.intra;
      plan.latency = p.latency_us(p.base() + p.hop(worst));
      plan.phases.push_back(std::move(phase));
      return plan;
    }
  }
  return no("unknown algorithm");
}

}  // namespace meshsim
