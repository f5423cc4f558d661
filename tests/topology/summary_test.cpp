#include <doctest/doctest.h>

#include <sstream>

#include "test_paths.hpp"
#include "topology/bisection.hpp"
#include "topology/graphviz.hpp"
#include "topology/topology_loader.hpp"
#include "topology/topology_summary.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

TEST_CASE("bisection of one DGX H100") {
  // GPUs 0-3 | 4-7. NVLink: each side's 4 GPUs x 450 GB/s through the NVSwitches = 1800 GB/s.
  // PCIe: GPUs 0-3 sit under socket 0, GPUs 4-7 under socket 1, so the host path adds the UPI
  // link's 40 GB/s. Max flow = 1840 GB/s.
  const auto t = load_topology(topology_path("dgx-h100.json"));
  CHECK(bisection_Bps(t) == doctest::Approx(1840e9));
}

TEST_CASE("bisection of the 64-node H100 superpod, and with a 2:1 spine") {
  // Halves = scalable unit 0 (nodes 0-31) and unit 1 (32-63). The cut is unit 0's 8 leaves'
  // up-links: 8 leaves x 32 ports x 50 GB/s = 12,800 GB/s (= 256 GPUs x 50 GB/s: full bisection).
  // 2:1 oversubscription halves every leaf's up-links: 6,400 GB/s.
  const auto full = load_topology(topology_path("dgx-h100-superpod.json"));
  const auto over = load_topology(topology_path("dgx-h100-superpod-2to1.json"));
  CHECK(bisection_Bps(full) == doctest::Approx(12.8e12));
  CHECK(bisection_Bps(over) == doctest::Approx(6.4e12));
}

TEST_CASE("bisection of a 4-node single-switch cluster equals half the NICs") {
  // 4 nodes x 8 NICs x 50 GB/s on one switch; the halves (2 nodes each) meet at the switch, so
  // the cut is 2 nodes x 8 x 50 GB/s = 800 GB/s.
  const Json doc = Json::parse(R"({
    "name": "t", "nodes": 4, "node_from": "dgx-h100.json",
    "fabric": {"kind": "single_switch", "link": {"kind": "infiniband", "bandwidth_Gbps": 400, "latency_ns": 500}}})");
  const auto t = load_topology_json(doc, topology_path("inline.json"));
  CHECK(bisection_Bps(t) == doctest::Approx(800e9));
}

TEST_CASE("graphviz export has one edge per physical link") {
  const auto t = load_topology(topology_path("dgx-h100.json"));
  std::ostringstream out;
  write_dot(out, t);
  const auto dot = out.str();
  CHECK(dot.starts_with("digraph G {"));
  std::size_t edges = 0;
  for (std::size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 2)) ++edges;
  CHECK(edges == t.link_count());
  CHECK(dot.find("label=\"n0/gpu0\"") != std::string::npos);
  CHECK(dot.find("nvlink 112.5 GB/s") != std::string::npos);
}

TEST_CASE("a GPU's host link: PCIe on DGX H100, NVLink-C2C to its Grace on GB200") {
  // dgx-h100.json: one PCIe Gen5 x16 link per GPU, 64 GB/s per direction, no C2C.
  const auto dgx = load_topology(topology_path("dgx-h100.json"));
  const auto g0 = dgx.gpus().front();
  CHECK(pcie_Bps_of(dgx, g0) == doctest::Approx(64e9));
  CHECK(link_Bps_of(dgx, g0, LinkKind::c2c) == 0);
  CHECK(host_link_Bps_of(dgx, g0) == doctest::Approx(64e9));
  CHECK(summarize(dgx, false).c2c_Bps == 0);
  // gb200-nvl72.json: the GPU has no PCIe link; its Grace's 900 GB/s C2C (bidirectional) is
  // shared by two GPUs, 225 GB/s per direction each.
  const auto gb = load_topology(topology_path("gb200-nvl72.json"), {.nodes = 1});
  const auto b0 = gb.gpus().front();
  CHECK(pcie_Bps_of(gb, b0) == 0);
  CHECK(host_link_Bps_of(gb, b0) == doctest::Approx(225e9));
  CHECK(summarize(gb, false).c2c_Bps == doctest::Approx(225e9));
}
