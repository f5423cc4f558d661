#include "topology/router.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace meshsim {
namespace {
constexpr double kChunkBytes = 65536.0;
constexpr std::size_t kMaxPaths = 256;
constexpr std::int64_t kUnreachable = std::numeric_limits<std::int64_t>::max() / 4;

// Which of `n` equal next hops a route from src to dst takes at `hop`: a fixed hash, like ECMP.
std::size_t hashed_choice(std::size_t n, VertexId src, VertexId dst, std::uint32_t hop) {
  return hash_combine(hash_combine(mix64(src), dst), hop) % n;
}
// The same at fabric switch `at`, whose own seed enters the hash, as switches seed their ECMP
// hashes so that the tiers do not all make the same choice (hash polarization). Without it every
// branch of a route striped over a pod's spines made the same choice at the next tier: on a
// three-tier fat tree 31 of 32 branches met on one core and one spine down.
std::size_t hashed_choice(std::size_t n, VertexId src, VertexId dst, std::uint32_t hop,
                          std::uint32_t at) {
  return hash_combine(hash_combine(hash_combine(mix64(src), dst), hop), at) % n;
}

// One of the striped `paths` for a flow whose hash is `h`, each as likely as its share of the
// striping: the flow is not striped, it takes one path, as ECMP does per flow. With equal
// shares (two tiers: a leaf's spines) that is h mod the count. Three tiers stripe unevenly (the
// first spine's branch is split over every core, the others are not: kMaxPaths), and a pick by
// position sent three flows in four through the first spine: a 512-node tree all-reduce ran at
// 3 GB/s of bus bandwidth.
const Path& path_by_share(const std::vector<Path>& paths, std::uint64_t h) {
  const double first = paths.front().fraction;
  if (std::all_of(paths.begin(), paths.end(), [&](const Path& p) { return p.fraction == first; }))
    return paths[h % paths.size()];
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  double below = 0;
  for (const auto& p : paths) {
    below += p.fraction;
    if (u < below) return p;
  }
  return paths.back();  // rounding: the fractions sum to 1 within a few ulps
}
}  // namespace

Router::Router(const Topology& topo)
    : topo_(topo),
      dist_(topo.vertex_count(), 0),
      seen_(topo.vertex_count(), 0),
      settled_(topo.vertex_count(), 0) {
  cache_.reserve(4096);
  // Every search relaxes thousands of links: their costs are computed once (a division each).
  link_costs_.resize(topo.directed_edge_count());
  for (std::size_t i = 0; i < link_costs_.size(); ++i)
    link_costs_[i] = link_cost(topo.link(static_cast<std::uint32_t>(i)));
  // Each node's NICs with their single link into the fabric. A node whose NICs do not all have
  // exactly one fabric link is left out (routes to it use the general search).
  const auto& g = topo.graph();
  exits_.resize(static_cast<std::size_t>(std::max(0, topo.node_count())));
  std::vector<char> broken(exits_.size(), 0);
  for (VertexId v = 0; v < topo.vertex_count(); ++v) {
    const Vertex& x = topo.vertex(v);
    if (x.kind != VertexKind::nic || x.node < 0) continue;
    int links = 0;
    Exit exit{v, 0, 0, 0};
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const VertexId w = boost::target(*e, g);
      if (topo.vertex(w).node >= 0) continue;
      ++links;
      exit.fabric = w;
      exit.out = g[*e].id;
      exit.cost = link_cost(g[*e]);
    }
    const auto n = static_cast<std::size_t>(x.node);
    if (links == 1)
      exits_[n].push_back(exit);
    else
      broken[n] = 1;
  }
  for (std::size_t n = 0; n < exits_.size(); ++n)
    if (broken[n]) exits_[n].clear();
  fabric_index_.assign(topo.vertex_count(), 0);
  for (VertexId v = 0; v < topo.vertex_count(); ++v)
    if (topo.vertex(v).node < 0) {
      fabric_index_[v] = static_cast<std::uint32_t>(fabric_vertices_.size());
      fabric_vertices_.push_back(v);
    }
  fabric_dist_.resize(fabric_vertices_.size());
  // The fabric's own links (switch to switch) as a compact adjacency list: the searches over
  // the fabric skip every NIC link of every switch without looking at it.
  fabric_offsets_.assign(fabric_vertices_.size() + 1, 0);
  for (std::size_t i = 0; i < fabric_vertices_.size(); ++i) {
    for (auto [e, end] = boost::out_edges(fabric_vertices_[i], g); e != end; ++e) {
      const VertexId w = boost::target(*e, g);
      if (topo.vertex(w).node >= 0) continue;
      fabric_links_.push_back(FabricLink{fabric_index_[w], g[*e].id, link_costs_[g[*e].id]});
    }
    fabric_offsets_[i + 1] = static_cast<std::uint32_t>(fabric_links_.size());
  }
}

std::int64_t Router::link_cost(const Link& l) {
  // Each term is capped at 2^40 ps (about a second), so absurd inputs (a link of 1e-300 B/s or
  // a latency of years) still give finite costs whose sums over any path cannot overflow.
  constexpr double kCap = 1099511627776.0;
  const double chunk_ps = std::min(kCap, std::ceil(kChunkBytes / l.bandwidth_Bps * 1e12));
  const double latency_ps = std::min(kCap, static_cast<double>(l.latency.picoseconds()));
  return static_cast<std::int64_t>(latency_ps + chunk_ps);
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
  ++searches_;
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
    ++settled_count_;
    if (v == src) return true;
    if (v != dst && !may_transit(v, src_node, dst_node)) continue;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      if (!usable(g[*e])) continue;
      const VertexId u = boost::target(*e, g);
      const std::int64_t nd = d + cost_of(g[*e]);
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
      if (usable(g[*e]) && settled_[w] == epoch_ && dist_[w] + cost_of(g[*e]) == dist_[at] &&
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
  return next[hashed_choice(next.size(), src, dst, hop)];
}

std::int64_t Router::path_cost(const Path& p) const {
  std::int64_t c = 0;
  for (auto id : p.edges) c += link_costs_[id];
  return c;
}

Route Router::compute(VertexId src, VertexId dst) {
  Route r{src, dst, {}};
  if (src == dst) return r;
  // Two GPUs: NVLinks alone first (the header says why), then any path. The expansion walks
  // the links the successful search walked.
  nvlink_only_ =
      topo_.vertex(src).kind == VertexKind::gpu && topo_.vertex(dst).kind == VertexKind::gpu;
  if (nvlink_only_ && !search(src, dst)) nvlink_only_ = false;
  if (!nvlink_only_ && !search(src, dst))
    throw Error(
        "", "",
        "no route from '" + topo_.vertex(src).name + "' to '" + topo_.vertex(dst).name + "'");
  Path start;
  expand(src, src, dst, start, 1.0, r.paths, 0);
  nvlink_only_ = false;
  r.cost = path_cost(r.paths.front());
  return r;
}

const std::vector<Path>& Router::fabric_paths(VertexId a, VertexId b) {
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | b;
  if (auto it = fabric_.find(key); it != fabric_.end()) return it->second;
  std::vector<Path> paths;
  if (a == b) {
    paths.emplace_back();
  } else {
    // Switches are the only transit vertices between two switches, so the per-target fabric
    // distances give the least costs: no search over the whole graph per switch pair.
    const auto& to_b = fabric_distances(b);
    if (to_b[fabric_index_[a]] == kUnreachable)
      throw Error("", "",
                  "no route from '" + topo_.vertex(a).name + "' to '" + topo_.vertex(b).name + "'");
    Path start;
    fabric_expand(fabric_index_[a], a, b, to_b, start, 1.0, paths, 0);
  }
  return fabric_.emplace(key, std::move(paths)).first->second;
}

void Router::fabric_expand(std::uint32_t at, VertexId src, VertexId dst,
                           const std::vector<std::int64_t>& to_dst, Path& current, double fraction,
                           std::vector<Path>& out, std::uint32_t hop) {
  const auto end = fabric_index_[dst];
  std::vector<std::uint32_t> next;  // indices into fabric_links_, in out-edge order
  while (at != end) {
    next.clear();
    for (auto k = fabric_offsets_[at]; k < fabric_offsets_[at + 1]; ++k) {
      const auto& link = fabric_links_[k];
      if (to_dst[link.to] != kUnreachable && to_dst[link.to] + link.cost == to_dst[at])
        next.push_back(k);
    }
    if (next.size() > 1 && out.size() + next.size() <= kMaxPaths) {
      const double share = fraction / static_cast<double>(next.size());
      for (auto k : next) {
        const auto& link = fabric_links_[k];
        Path branch = current;
        branch.edges.push_back(link.id);
        branch.latency += topo_.link(link.id).latency;
        fabric_expand(link.to, src, dst, to_dst, branch, share, out, hop + 1);
      }
      return;
    }
    const auto& link =
        fabric_links_[next[next.size() == 1 ? 0 : hashed_choice(next.size(), src, dst, hop, at)]];
    current.edges.push_back(link.id);
    current.latency += topo_.link(link.id).latency;
    at = link.to;
    ++hop;
  }
  current.fraction = fraction;
  out.push_back(std::move(current));
}

const std::vector<std::int64_t>& Router::fabric_distances(VertexId to) {
  const auto idx = fabric_index_[to];
  auto& d = fabric_dist_[idx];
  if (!d.empty()) return d;
  // Dijkstra over the fabric alone (switches, node -1): cost from every switch to `to`.
  d.assign(fabric_vertices_.size(), kUnreachable);
  using Item = std::pair<std::int64_t, std::uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  d[idx] = 0;
  heap.emplace(0, idx);
  while (!heap.empty()) {
    const auto [dv, v] = heap.top();
    heap.pop();
    if (dv != d[v]) continue;
    for (auto k = fabric_offsets_[v]; k < fabric_offsets_[v + 1]; ++k) {
      const auto& link = fabric_links_[k];
      const std::int64_t nd = dv + link.cost;
      if (nd < d[link.to]) {
        d[link.to] = nd;
        heap.emplace(nd, link.to);
      }
    }
  }
  return d;
}

std::optional<Route> Router::cross_node(VertexId src, VertexId dst) {
  const Vertex& a = topo_.vertex(src);
  const Vertex& b = topo_.vertex(dst);
  if (static_cast<std::size_t>(std::max(a.node, b.node)) >= exits_.size()) return std::nullopt;
  const auto& A = exits_[static_cast<std::size_t>(a.node)];
  const auto& B = exits_[static_cast<std::size_t>(b.node)];
  if (A.empty() || B.empty()) return std::nullopt;
  // Any path between two nodes leaves the first through one of its NICs and enters the second
  // through one of its NICs, so the least cost is the least over NIC pairs of (inside a) + (NIC
  // links) + (fabric between their switches) + (inside b).
  auto& cost_a = scratch_a_;
  auto& cost_b = scratch_b_;
  cost_a.resize(A.size());
  cost_b.resize(B.size());
  // Inside each node, node 0's routes stand for the node's own (local_route): costs do not
  // change under the shift, and no shifted copy is cached for every GPU-NIC pair.
  std::uint32_t shift = 0;
  for (std::size_t i = 0; i < A.size(); ++i)
    cost_a[i] = local_route(src, A[i].nic, shift).cost + A[i].cost;
  for (std::size_t j = 0; j < B.size(); ++j)
    cost_b[j] = B[j].cost + local_route(B[j].nic, dst, shift).cost;
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  auto& ties = scratch_ties_;
  ties.clear();
  for (std::size_t j = 0; j < B.size(); ++j) {
    const auto& to_b = fabric_distances(B[j].fabric);
    for (std::size_t i = 0; i < A.size(); ++i) {
      const std::int64_t f = to_b[fabric_index_[A[i].fabric]];
      if (f == kUnreachable) continue;
      const std::int64_t c = cost_a[i] + f + cost_b[j];
      if (c < best) {
        best = c;
        ties.clear();
      }
      if (c == best) ties.emplace_back(i, j);
    }
  }
  if (ties.empty()) return std::nullopt;
  // Rail affinity: each GPU's own NIC (same local index) when it is among the least-cost
  // choices, as NCCL pairs GPU i with NIC i; otherwise a fixed hash, like ECMP.
  auto own = [&](std::size_t i, std::size_t j) {
    return 2 * (topo_.vertex(A[i].nic).local == a.local) +
           (topo_.vertex(B[j].nic).local == b.local);
  };
  auto chosen = ties.front();
  int best_own = -1;
  const std::uint64_t h = hash_combine(mix64(src), dst);
  for (std::size_t t = 0; t < ties.size(); ++t) {
    const auto& c = ties[(t + h % ties.size()) % ties.size()];
    if (own(c.first, c.second) > best_own) {
      best_own = own(c.first, c.second);
      chosen = c;
    }
  }
  const Exit& ea = A[chosen.first];
  const Exit& eb = B[chosen.second];
  const auto& fab = fabric_paths(ea.fabric, eb.fabric);
  const Path& middle = path_by_share(fab, hash_combine(h, 0x5eed));
  Route r{src, dst, {}, best};
  std::uint32_t shift_a = 0, shift_b = 0;
  const Route& first = local_route(src, ea.nic, shift_a);
  const Route& last = local_route(eb.nic, dst, shift_b);
  for (const auto& p1 : first.paths)
    for (const auto& p3 : last.paths) {
      Path p;
      p.edges.reserve(p1.edges.size() + middle.edges.size() + p3.edges.size() + 2);
      for (auto e : p1.edges) p.edges.push_back(e + shift_a);
      p.edges.push_back(ea.out);
      p.edges.insert(p.edges.end(), middle.edges.begin(), middle.edges.end());
      p.edges.push_back(eb.out ^ 1u);  // the fabric → NIC direction of b's NIC link
      for (auto e : p3.edges) p.edges.push_back(e + shift_b);
      p.fraction = p1.fraction * p3.fraction;
      p.latency = p1.latency + topo_.link(ea.out).latency + middle.latency +
                  topo_.link(eb.out ^ 1u).latency + p3.latency;
      r.paths.push_back(std::move(p));
    }
  return r;
}

const Route* Router::node0_route(VertexId src, VertexId dst, std::uint32_t& shift) {
  const Vertex& a = topo_.vertex(src);
  const Vertex& b = topo_.vertex(dst);
  const auto& stride = topo_.stride;
  if (!stride.uniform || a.node <= 0 || a.node != b.node) return nullptr;
  // Inside node k a route is node 0's route shifted, when node 0's route stays inside node 0
  // (it may not: two PCIe GPUs on different sockets can be closer through the fabric).
  const auto k = static_cast<std::size_t>(a.node);
  const Route& base = route(src - k * stride.vertices_per_node, dst - k * stride.vertices_per_node);
  for (const auto& p : base.paths)
    for (auto e : p.edges)
      if (e >= stride.edges_per_node) return nullptr;
  shift = static_cast<std::uint32_t>(k * stride.edges_per_node);
  return &base;
}

const Route& Router::local_route(VertexId src, VertexId dst, std::uint32_t& shift) {
  if (const Route* base = node0_route(src, dst, shift)) return *base;
  shift = 0;
  return route(src, dst);
}

const Route& Router::route(VertexId src, VertexId dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | dst;
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::uint32_t shift = 0;
  if (const Route* base = node0_route(src, dst, shift)) {
    Route r{src, dst, base->paths, base->cost};
    for (auto& p : r.paths)
      for (auto& e : p.edges) e += shift;
    return cache_.emplace(key, std::move(r)).first->second;
  }
  const Vertex& a = topo_.vertex(src);
  const Vertex& b = topo_.vertex(dst);
  if (a.kind == VertexKind::gpu && b.kind == VertexKind::gpu && a.node != b.node && a.node >= 0 &&
      b.node >= 0)
    if (auto r = cross_node(src, dst)) return cache_.emplace(key, std::move(*r)).first->second;
  return cache_.emplace(key, compute(src, dst)).first->second;
}

const Route& Router::gpu_route(std::int32_t gpu_a, std::int32_t gpu_b) {
  const auto& gpus = topo_.gpus();
  return route(gpus.at(static_cast<std::size_t>(gpu_a)), gpus.at(static_cast<std::size_t>(gpu_b)));
}

std::optional<VertexId> first_unreachable_gpu(const Topology& topo) {
  // One breadth-first search from GPU 0 under the transit rules as seen from GPU 0's node: a
  // node other than GPU 0's may be entered but never left, and GPUs are never crossed.
  const auto& g = topo.graph();
  const auto& gpus = topo.gpus();
  if (gpus.empty()) return std::nullopt;
  const VertexId start = gpus.front();
  const std::int32_t home = topo.vertex(start).node;
  std::vector<char> seen(topo.vertex_count(), 0);
  std::deque<VertexId> q{start};
  seen[start] = 1;
  while (!q.empty()) {
    const VertexId v = q.front();
    q.pop_front();
    const Vertex& x = topo.vertex(v);
    if (v != start && x.kind == VertexKind::gpu) continue;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const VertexId u = boost::target(*e, g);
      if (seen[u]) continue;
      const Vertex& y = topo.vertex(u);
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
