#include "topology/router.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <queue>

#include "test_paths.hpp"
#include "topology/path_class.hpp"
#include "topology/topology_loader.hpp"
#include "topology/topology_summary.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {
std::vector<std::string> kinds_along(const Topology& t, const Path& p) {
  std::vector<std::string> out;
  for (auto id : p.edges)
    out.emplace_back(name_of(t.vertex(boost::target(t.edge(id), t.graph())).kind));
  return out;
}
double fraction_sum(const Route& r) {
  double s = 0;
  for (const auto& p : r.paths) s += p.fraction;
  return s;
}
}  // namespace

TEST_CASE("same node: GPU -> NVSwitch -> GPU, striped over all 4 NVSwitches") {
  //   gpu0 ──┬─ nvswitch0 ─┬── gpu5
  //          ├─ nvswitch1 ─┤
  //          ├─ nvswitch2 ─┤      (not via PCIe: 64 GB/s links cost more than 112.5 GB/s ones)
  //          └─ nvswitch3 ─┘
  const auto t = load_topology(topology_path("dgx-h100.json"));
  Router router(t);
  const auto& r = router.gpu_route(0, 5);
  CHECK(r.hops() == 2);
  REQUIRE(r.paths.size() == 4);
  for (const auto& p : r.paths) {
    CHECK(p.fraction == doctest::Approx(0.25));
    CHECK(kinds_along(t, p) == std::vector<std::string>{"nvswitch", "gpu"});
    CHECK(p.latency == Time::ns(200));
  }
  CHECK(classify(t, r) == PathClass::NVL);
  CHECK(classify(t, router.gpu_route(3, 3)) == PathClass::LOC);
}

TEST_CASE("superpod: same rail across nodes crosses one leaf") {
  // n0/gpu0 → pcie0 → nic0 → leaf(u0, rail 0) → n1/nic0 → pcie0 → n1/gpu0: 6 hops.
  const auto t = load_topology(topology_path("dgx-h100-superpod.json"));
  Router router(t);
  const auto& r = router.gpu_route(0, 8);
  REQUIRE(r.paths.size() == 1);
  CHECK(kinds_along(t, r.paths[0]) ==
        std::vector<std::string>{"pcie_switch", "nic", "leaf_switch", "nic", "pcie_switch", "gpu"});
  CHECK(classify(t, r) == PathClass::NET);
}

TEST_CASE("superpod: cross-rail traffic crosses a spine") {
  // n0/gpu0 (PCIe switch 0, NICs 0-1) to n1/gpu2 (PCIe switch 1, NICs 2-3): the rails differ,
  // so the route climbs to a spine: gpu pcie nic leaf spine leaf nic pcie gpu = 8 hops. (Going
  // through n0's CPU to NIC 2 is also 8 hops but costs more: three 64 GB/s PCIe hops instead of
  // two 200 GB/s leaf-spine hops.)
  const auto t = load_topology(topology_path("dgx-h100-superpod.json"));
  Router router(t);
  const auto& r = router.gpu_route(0, 8 + 2);
  REQUIRE(r.paths.size() == 1);
  CHECK(kinds_along(t, r.paths[0]) == std::vector<std::string>{"pcie_switch", "nic", "leaf_switch",
                                                               "spine_switch", "leaf_switch", "nic",
                                                               "pcie_switch", "gpu"});
}

TEST_CASE("superpod: across scalable units, same rail, through a spine") {
  // Node 0 (unit 0) to node 32 (unit 1): leaf(u0,r0) → spine → leaf(u1,r0).
  const auto t = load_topology(topology_path("dgx-h100-superpod.json"));
  Router router(t);
  CHECK(router.gpu_route(0, 32 * 8).hops() == 8);
}

TEST_CASE("ECMP: the spine is chosen by a fixed hash, spread over spines, stable") {
  const auto t = load_topology(topology_path("dgx-h100-superpod.json"));
  Router a(t), b(t);
  std::set<std::string> spines_used;
  for (int dst_node = 32; dst_node < 64; ++dst_node) {
    const auto& ra = a.gpu_route(0, dst_node * 8);
    const auto& rb = b.gpu_route(0, dst_node * 8);
    CHECK(ra.paths[0].edges == rb.paths[0].edges);  // deterministic across routers
    const auto spine_edge = ra.paths[0].edges[3];
    spines_used.insert(t.vertex(boost::target(t.edge(spine_edge), t.graph())).name);
  }
  CHECK(spines_used.size() >= 4);  // 32 destinations hashed over 8 spines
  // A second pass is served from the cache.
  const auto cached = a.cached_routes();
  for (int dst_node = 32; dst_node < 64; ++dst_node) a.gpu_route(0, dst_node * 8);
  CHECK(a.cached_routes() == cached);
}

TEST_CASE("h100-16k: across pods through a core switch") {
  // Node 0 (pod 0) to node 256 (pod 1), same rail: gpu pcie nic leaf spine core spine leaf nic
  // pcie gpu = 10 hops.
  const auto t = load_topology(topology_path("h100-16k.json"));
  Router router(t);
  const auto& r = router.gpu_route(0, 256 * 8);
  CHECK(r.hops() == 10);
  CHECK(kinds_along(t, r.paths[0])[4] == "core_switch");
}

TEST_CASE(
    "h100-16k: flows between pods spread over the spines as ECMP would, not by list position") {
  // Between two leaves of different pods the fabric's paths are striped unevenly: the first
  // spine's branch over every core, the other 31 spines' as one path each (kMaxPaths), each
  // spine 1/32 of the share. A flow takes one path with the probability of its share, so about
  // 1/32 of the 1,024 flows below leave through any one spine; a pick by list position sent
  // about three in four through spine 0.
  const auto t = load_topology(topology_path("h100-16k.json"), {.nodes = 512});
  Router router(t);
  std::map<std::string, int> spine_of;
  for (int a = 0; a < 256; ++a)
    for (int rail = 0; rail < 4; ++rail) {
      const auto& r = router.gpu_route(a * 8 + rail, (256 + (a * 7) % 256) * 8 + rail);
      REQUIRE(r.paths.size() == 1);
      ++spine_of[t.vertex(boost::target(t.edge(r.paths[0].edges[3]), t.graph())).name];
    }
  int most = 0;
  for (const auto& [name, n] : spine_of) most = std::max(most, n);
  CHECK(spine_of.size() == 32);  // every spine of pod 0 is used
  CHECK(most <= 3 * 1024 / 32);  // none carries more than three times its share
}

TEST_CASE("pcie-8gpu path classes, like nvidia-smi topo -m") {
  //  cpu0 ── UPI ── cpu1
  //  ├ pcie0: gpu0 gpu1   ├ pcie2: gpu4 gpu5
  //  └ pcie1: gpu2 gpu3   └ pcie3: gpu6 gpu7
  const auto t = load_topology(topology_path("pcie-8gpu.json"));
  Router router(t);
  const auto m = path_matrix(t, router, 16);
  REQUIRE(m.size() == 8);
  CHECK(m[0][0] == PathClass::LOC);
  CHECK(m[0][1] == PathClass::PIX);
  CHECK(m[0][2] == PathClass::PHB);
  CHECK(m[0][4] == PathClass::SYS);
  CHECK(m[7][6] == PathClass::PIX);
  CHECK(router.gpu_route(0, 4).hops() == 5);
}

TEST_CASE("gb200-nvl72: any two GPUs of a rack are one NVLink switch apart, over 18 planes") {
  const auto t = load_topology(topology_path("gb200-nvl72.json"));
  Router router(t);
  const auto& r = router.gpu_route(0, 71);
  CHECK(r.hops() == 2);
  CHECK(r.paths.size() == 18);
  CHECK(fraction_sum(r) == doctest::Approx(1.0));
  CHECK(classify(t, r) == PathClass::NVL);
  CHECK(classify(t, router.gpu_route(0, 72)) == PathClass::NET);
}

TEST_CASE("GPUs are never transit hops and servers do not forward") {
  // In the explicit lab cluster, a/gpu0 → b/gpu1 must go a/pcie → a/nic → tor → b/nic → b/pcie.
  const auto t = load_topology(topology_path("lab-2node-explicit.json"));
  Router router(t);
  const auto& r = router.gpu_route(0, 3);
  CHECK(kinds_along(t, r.paths[0]) ==
        std::vector<std::string>{"pcie_switch", "nic", "leaf_switch", "nic", "pcie_switch", "gpu"});
  for (const auto& p : r.paths) {
    for (std::size_t i = 0; i + 1 < p.edges.size(); ++i) {
      const auto v = boost::target(t.edge(p.edges[i]), t.graph());
      CHECK(t.vertex(v).kind != VertexKind::gpu);
    }
  }
}

namespace {
// Least cost from `src` to `dst` under the routing rules (GPUs are never transit hops; a node's
// internals carry only its own traffic), by a plain Dijkstra over the whole graph: the
// reference the router's composed cross-node routes (NIC exits + fabric distances per target
// switch) must match.
std::int64_t reference_cost(const Topology& t, VertexId src, VertexId dst) {
  const auto& g = t.graph();
  const auto src_node = t.vertex(src).node, dst_node = t.vertex(dst).node;
  std::vector<std::int64_t> dist(t.vertex_count(), std::numeric_limits<std::int64_t>::max());
  using Item = std::pair<std::int64_t, VertexId>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  dist[src] = 0;
  heap.emplace(0, src);
  while (!heap.empty()) {
    const auto [d, v] = heap.top();
    heap.pop();
    if (d != dist[v]) continue;
    if (v == dst) return d;
    const auto& x = t.vertex(v);
    if (v != src &&
        (x.kind == VertexKind::gpu || (x.node >= 0 && x.node != src_node && x.node != dst_node)))
      continue;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const auto u = boost::target(*e, g);
      const auto nd = d + Router::link_cost(g[*e]);
      if (nd < dist[u]) {
        dist[u] = nd;
        heap.emplace(nd, u);
      }
    }
  }
  return -1;
}
}  // namespace

TEST_CASE("cross-node routes are least-cost paths, as a search over the whole cluster finds") {
  // Across units, pods and rails of a three-tier fabric and of a 2:1 two-tier one: every path
  // is connected from source to destination, costs the route's cost, and that cost is the least
  // a plain Dijkstra over every vertex finds.
  for (const char* file : {"h100-16k.json", "dgx-h100-superpod-2to1.json"}) {
    CAPTURE(file);
    const auto t = load_topology(topology_path(file));
    Router router(t);
    const auto gpus = static_cast<std::int32_t>(t.gpus().size());
    for (std::int32_t k = 0; k < 12; ++k) {
      const std::int32_t a = (k * 977) % gpus, b = (k * 4111 + 2053) % gpus;
      if (a / 8 == b / 8) continue;
      CAPTURE(a);
      CAPTURE(b);
      const auto& r = router.gpu_route(a, b);
      const auto src = t.gpus()[static_cast<std::size_t>(a)];
      const auto dst = t.gpus()[static_cast<std::size_t>(b)];
      CHECK(r.cost == reference_cost(t, src, dst));
      CHECK(fraction_sum(r) == doctest::Approx(1.0));
      for (const auto& p : r.paths) {
        std::int64_t cost = 0;
        VertexId at = src;
        for (auto id : p.edges) {
          CHECK(boost::source(t.edge(id), t.graph()) == at);
          at = boost::target(t.edge(id), t.graph());
          cost += Router::link_cost(t.link(id));
        }
        CHECK(at == dst);
        CHECK(cost == r.cost);
      }
    }
  }
}

TEST_CASE("GB200: two GPUs under one Grace talk over NVLink, not through the CPU") {
  //   gpu0 ──┬─ nvswitch0..17 ─┬── gpu1      (what the route is: 18 NVLink5 planes, 50 GB/s each)
  //          └──── grace0 ─────┘             (cheaper by cost: C2C 225 GB/s, 100 ns a hop)
  // NCCL ranks NVL before C2C/PHB, so the all-NVLink path wins although it costs more.
  const auto t = load_topology(topology_path("gb200-nvl72.json"), {.nodes = 1});
  Router router(t);
  const auto& r = router.gpu_route(0, 1);
  REQUIRE(r.paths.size() == 18);
  for (const auto& p : r.paths) {
    CHECK(kinds_along(t, p) == std::vector<std::string>{"nvswitch", "gpu"});
    CHECK(p.fraction == doctest::Approx(1.0 / 18));
  }
  CHECK(classify(t, r) == PathClass::NVL);
  // A GPU's route to its NIC still goes through its Grace (C2C, then PCIe): only GPU pairs
  // prefer NVLink.
  VertexId nic0 = 0;
  while (t.vertex(nic0).kind != VertexKind::nic) ++nic0;
  const auto& to_nic = router.route(t.gpus().front(), nic0);
  REQUIRE(to_nic.paths.size() == 1);
  CHECK(kinds_along(t, to_nic.paths.front()) == std::vector<std::string>{"cpu", "nic"});
  // Without an NVLink between them (PCIe-only servers), GPUs still reach each other the old way.
  const auto pcie = load_topology(topology_path("pcie-8gpu.json"));
  Router pr(pcie);
  CHECK(classify(pcie, pr.gpu_route(0, 1)) == PathClass::PIX);
}
