#include "topology/router.hpp"

#include <cmath>
#include <deque>
#include <queue>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace meshsim {
namespace {
constexpr double kChunkBytes = 65536.0;
constexpr std::size_t kMaxPaths = 256;
}  // namespace

Router::Router(const Topology& topo)
    : topo_(topo),
      dist_(topo.vertex_count(), 0),
      seen_(topo.vertex_count(), 0),
      settled_(topo.vertex_count(), 0) {}

std::int64_t Router::link_cost(const Link& l) {
  return l.latency.picoseconds() +
         static_cast<std::int64_t>(std::ceil(kChunkBytes / l.bandwidth_Bps * 1e12));
}

bool Router::may_transit(VertexId v, std::int32_t src_node, std::int32_t dst_node) const {
  const Vertex& x = topo_.vertex(v);
  if (x.kind == VertexKind::gpu) return false;
  return x.node < 0 || x.node == src_node || x.node == dst_node;
}

bool Router::search(VertexId src, VertexId dst) {
  if (++epoch_ == 0) {  // wrapped: clear the stamps once every 2^32 searches
    std::fill(seen_.begin(), seen_.end(), 0);
    std::fill(settled_.begin(), settled_.end(), 0);
    epoch_ = 1;
  }
  const auto& g = topo_.graph();
  const std::int32_t src_node = topo_.vertex(src).node;
  const std::int32_t dst_node = topo_.vertex(dst).node;
  using Item = std::pair<std::int64_t, VertexId>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  dist_[dst] = 0;
  seen_[dst] = epoch_;
  heap.emplace(0, dst);
  // Links are full duplex with equal cost both ways, so searching outward from dst over
  // out-edges gives the cost *to* dst from every settled vertex.
  while (!heap.empty()) {
    const auto [d, v] = heap.top();
    heap.pop();
    if (settled_[v] == epoch_) continue;
    settled_[v] = epoch_;
    if (v == src) return true;
    if (v != dst && !may_transit(v, src_node, dst_node)) continue;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const VertexId u = boost::target(*e, g);
      const std::int64_t nd = d + link_cost(g[*e]);
      if (seen_[u] != epoch_ || nd < dist_[u]) {
        seen_[u] = epoch_;
        dist_[u] = nd;
        heap.emplace(nd, u);
      }
    }
  }
  return false;
}

void Router::expand(VertexId at, VertexId src, VertexId dst, Path& current, double fraction,
                    std::vector<Path>& out, std::uint32_t hop) {
  const auto& g = topo_.graph();
  const std::int32_t src_node = topo_.vertex(src).node;
  const std::int32_t dst_node = topo_.vertex(dst).node;
  while (at != dst) {
    std::vector<EdgeId> next;
    for (auto [e, end] = boost::out_edges(at, g); e != end; ++e) {
      const VertexId w = boost::target(*e, g);
      if (settled_[w] == epoch_ && dist_[w] + link_cost(g[*e]) == dist_[at] &&
          (w == dst || may_transit(w, src_node, dst_node)))
        next.push_back(*e);
    }
    // `next` is never empty: `at` lies on a least-cost path, so some neighbour continues it.
    const bool spray =
        next.size() > 1 && is_nvlink(g[next.front()].kind) && out.size() + next.size() <= kMaxPaths;
    if (spray) {
      for (const auto& e : next) {
        Path branch = current;
        branch.edges.push_back(g[e].id);
        branch.latency += g[e].latency;
        expand(boost::target(e, g), src, dst, branch, fraction / static_cast<double>(next.size()),
               out, hop + 1);
      }
      return;
    }
    const EdgeId e = next.size() == 1 ? next.front() : pick(next, src, dst, hop);
    current.edges.push_back(g[e].id);
    current.latency += g[e].latency;
    at = boost::target(e, g);
    ++hop;
  }
  current.fraction = fraction;
  out.push_back(std::move(current));
}

EdgeId Router::pick(const std::vector<EdgeId>& next, VertexId src, VertexId dst,
                    std::uint32_t hop) const {
  const std::uint64_t h = hash_combine(hash_combine(mix64(src), dst), hop);
  return next[h % next.size()];
}

std::optional<VertexId> Router::own_nic(VertexId gpu) const {
  const Vertex& g = topo_.vertex(gpu);
  for (auto [e, end] = boost::out_edges(gpu, topo_.graph()); e != end; ++e) {
    // The NIC sits behind the GPU's PCIe switch (or its CPU): look two hops out.
    const VertexId mid = boost::target(*e, topo_.graph());
    for (auto [f, fend] = boost::out_edges(mid, topo_.graph()); f != fend; ++f) {
      const VertexId v = boost::target(*f, topo_.graph());
      const Vertex& x = topo_.vertex(v);
      if (x.kind == VertexKind::nic && x.node == g.node && x.local == g.local) return v;
    }
  }
  return std::nullopt;
}

std::int64_t Router::path_cost(const Path& p) const {
  std::int64_t c = 0;
  for (auto id : p.edges) c += link_cost(topo_.link(id));
  return c;
}

Route Router::compute(VertexId src, VertexId dst) {
  Route r{src, dst, {}};
  if (src == dst) return r;
  if (!search(src, dst))
    throw Error("", "", "no route from '" + topo_.vertex(src).name + "' to '" +
                            topo_.vertex(dst).name + "'");
  Path start;
  expand(src, src, dst, start, 1.0, r.paths, 0);
  return r;
}

const Route& Router::route(VertexId src, VertexId dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | dst;
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  Route r = compute(src, dst);
  // Rail affinity at both ends: between GPUs of different nodes, go out through the source's own
  // NIC and in through the destination's own NIC whenever that is one of the least-cost paths
  // (ECMP at a spine would otherwise pick any rail's leaf and pile two GPUs onto one NIC).
  const Vertex& a = topo_.vertex(src);
  const Vertex& b = topo_.vertex(dst);
  if (a.kind == VertexKind::gpu && b.kind == VertexKind::gpu && a.node != b.node) {
    const auto nic_a = own_nic(src), nic_b = own_nic(dst);
    if (nic_a && nic_b && !r.paths.empty()) {
      const Route first = compute(src, *nic_a);
      const Route middle = compute(*nic_a, *nic_b);
      const Route last = compute(*nic_b, dst);
      if (!first.paths.empty() && !middle.paths.empty() && !last.paths.empty() &&
          path_cost(first.paths.front()) + path_cost(middle.paths.front()) +
                  path_cost(last.paths.front()) ==
              path_cost(r.paths.front())) {
        Route composed{src, dst, {}};
        for (const auto& p1 : first.paths)
          for (const auto& p2 : middle.paths)
            for (const auto& p3 : last.paths) {
              Path p;
              p.edges = p1.edges;
              p.edges.insert(p.edges.end(), p2.edges.begin(), p2.edges.end());
              p.edges.insert(p.edges.end(), p3.edges.begin(), p3.edges.end());
              p.fraction = p1.fraction * p2.fraction * p3.fraction;
              p.latency = p1.latency + p2.latency + p3.latency;
              composed.paths.push_back(std::move(p));
            }
        r = std::move(composed);
      }
    }
  }
  return cache_.emplace(key, std::move(r)).first->second;
}

const Route& Router::gpu_route(std::int32_t gpu_a, std::int32_t gpu_b) {
  const auto& gpus = topo_.gpus();
  return route(gpus.at(static_cast<std::size_t>(gpu_a)), gpus.at(static_cast<std::size_t>(gpu_b)));
}

std::optional<VertexId> Router::first_unreachable_gpu() const {
  // One breadth-first search from GPU 0 under the transit rules as seen from GPU 0's node: a
  // node other than GPU 0's may be entered but never left, and GPUs are never crossed.
  const auto& g = topo_.graph();
  const auto& gpus = topo_.gpus();
  if (gpus.empty()) return std::nullopt;
  const VertexId start = gpus.front();
  const std::int32_t home = topo_.vertex(start).node;
  std::vector<char> seen(topo_.vertex_count(), 0);
  std::deque<VertexId> q{start};
  seen[start] = 1;
  while (!q.empty()) {
    const VertexId v = q.front();
    q.pop_front();
    const Vertex& x = topo_.vertex(v);
    if (v != start && x.kind == VertexKind::gpu) continue;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const VertexId u = boost::target(*e, g);
      if (seen[u]) continue;
      const Vertex& y = topo_.vertex(u);
      if (x.node >= 0 && x.node != home && y.node != x.node) continue;  // servers do not forward
      seen[u] = 1;
      q.push_back(u);
    }
  }
  for (VertexId v : gpus)
    if (!seen[v]) return v;
  return std::nullopt;
}

}  // namespace meshsim
