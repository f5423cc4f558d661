#include <doctest/doctest.h>

#include <map>

#include "test_paths.hpp"
#include "topology/router.hpp"
#include "topology/topology_loader.hpp"
#include "topology/topology_summary.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {
Topology load(const std::string& name, std::optional<std::int32_t> nodes = std::nullopt) {
  return load_topology(topology_path(name), TopologyOptions{nodes});
}
}  // namespace

TEST_CASE("dgx-h100: 8 GPUs on 4 NVSwitches, 8 NICs, 2 sockets") {
  const auto t = load("dgx-h100.json");
  const auto s = summarize(t, false);
  CHECK(s.gpus == 8);
  CHECK(s.nodes == 1);
  CHECK(s.vertices.at("gpu") == 8);
  CHECK(s.vertices.at("nvswitch") == 4);
  CHECK(s.vertices.at("pcie_switch") == 4);
  CHECK(s.vertices.at("cpu") == 2);
  CHECK(s.vertices.at("nic") == 8);
  // Links: 8x4 GPU-NVSwitch; PCIe: 8 GPU + 8 NIC + 4 switch up-links; 1 UPI.
  CHECK(s.links.at("nvlink") == 32);
  CHECK(s.links.at("pcie") == 20);
  CHECK(s.links.at("cpu_interconnect") == 1);
  // 4 NVSwitch links x 112.5 GB/s = 450 GB/s per direction (NVLink4, 18 links).
  CHECK(s.nvlink_Bps == doctest::Approx(450e9));
  CHECK(s.pcie_Bps == doctest::Approx(64e9));
  CHECK(s.network_Bps == 0.0);  // a lone node: NICs lead nowhere
  CHECK(t.gpu.model == "H100-SXM5-80GB");
  CHECK(t.gpu.peak_flops.at("bf16") == 989e12);
  CHECK(t.gpu.hbm_bytes == Bytes::GiB(80));
  CHECK(t.sources.size() >= 4);
}

TEST_CASE("hgx-h200 reuses the DGX H100 node with H200 GPUs") {
  const auto t = load("hgx-h200.json");
  CHECK(t.gpu_count() == 8);
  CHECK(t.gpu.model == "H200-SXM-141GB");
  CHECK(t.gpu.hbm_Bps == 4.8e12);
  CHECK(summarize(t, false).nvlink_Bps == doctest::Approx(450e9));
}

TEST_CASE("dgx-a100: 12 NVLink3 links = 300 GB/s per direction on 6 NVSwitches") {
  const auto s = summarize(load("dgx-a100.json"), false);
  CHECK(s.vertices.at("nvswitch") == 6);
  CHECK(s.nvlink_Bps == doctest::Approx(300e9));
  CHECK(s.pcie_Bps == doctest::Approx(32e9));
}

TEST_CASE("pcie-8gpu has no NVLink") {
  const auto s = summarize(load("pcie-8gpu.json"), false);
  CHECK(s.gpus == 8);
  CHECK(!s.links.contains("nvlink"));
  CHECK(s.nvlink_Bps == 0.0);
}

TEST_CASE("dgx-h100-superpod: 64 nodes = 512 GPUs by default, 16,384 with --nodes 2048") {
  const auto t = load("dgx-h100-superpod.json");
  const auto s = summarize(t, false);
  CHECK(s.gpus == 512);
  CHECK(s.nodes == 64);
  // Rail-optimized: 2 units of 32 nodes x 8 rails = 16 leaves; 8 spines.
  CHECK(s.vertices.at("leaf_switch") == 16);
  CHECK(s.vertices.at("spine_switch") == 8);
  CHECK(s.links.at("infiniband") == 512 + 16 * 8);
  CHECK(s.network_Bps == doctest::Approx(50e9));  // 400 Gb/s NDR per GPU
  const auto big = load("dgx-h100-superpod.json", 2048);
  CHECK(big.gpu_count() == 16384);
  CHECK(big.node_count() == 2048);
}

TEST_CASE("dgx-a100-superpod: HDR 200 Gb/s per GPU, 20-node units") {
  const auto s = summarize(load("dgx-a100-superpod.json"), false);
  CHECK(s.gpus == 512);
  CHECK(s.network_Bps == doctest::Approx(25e9));
  // 64 nodes in units of 20: 4 units (the last has 4 nodes) x 8 rails.
  CHECK(s.vertices.at("leaf_switch") == 32);
}

TEST_CASE("h100-16k: three tiers, 16,384 GPUs") {
  const auto s = summarize(load("h100-16k.json"), false);
  CHECK(s.gpus == 16384);
  // 8 pods x 8 units x 8 rails = 512 leaves; 8 pods x 32 spines; 64 cores.
  CHECK(s.vertices.at("leaf_switch") == 512);
  CHECK(s.vertices.at("spine_switch") == 256);
  CHECK(s.vertices.at("core_switch") == 64);
}

TEST_CASE("h100-16k on 264 nodes: the part-filled pod's spines link to as many cores as ports") {
  // Pod 0: 256 nodes, 8 units × 8 rails = 64 leaves, each 32 × 50 GB/s up over 32 spines: a spine
  // has 64 × 50 GB/s down, so a 50 GB/s link to each of the 64 cores. Pod 1: 8 nodes, one unit,
  // 8 leaves: a spine has 8 × 50 GB/s down, so 8 links at the 50 GB/s port rate (not 64 at 6.25).
  const auto t = load_topology(test::topology_path("h100-16k.json"), {.nodes = 264});
  const auto& g = t.graph();
  const auto up_links = [&](const std::string& spine) {
    std::vector<double> bw;
    for (auto [e, end] = boost::out_edges(*t.find(spine), g); e != end; ++e)
      if (t.vertex(boost::target(*e, g)).kind == VertexKind::core_switch)
        bw.push_back(g[*e].bandwidth_Bps);
    return bw;
  };
  const auto full = up_links("spine/p0/0");
  CHECK(full.size() == 64);
  for (double b : full) CHECK(b == doctest::Approx(50e9));
  const auto part = up_links("spine/p1/0");
  CHECK(part.size() == 8);
  for (double b : part) CHECK(b == doctest::Approx(50e9));
  // Spine s of pod 1 starts at core 8s: the 32 spines reach every core 4 times.
  std::map<std::string, int> reached;
  for (int s = 0; s < 32; ++s)
    for (auto [e, end] = boost::out_edges(*t.find("spine/p1/" + std::to_string(s)), g); e != end;
         ++e)
      if (t.vertex(boost::target(*e, g)).kind == VertexKind::core_switch)
        ++reached[t.vertex(boost::target(*e, g)).name];
  CHECK(reached.size() == 64);
  for (const auto& [core, n] : reached) CHECK(n == 4);
}

TEST_CASE("a 2:1 core tier: each spine links to half the cores at the port rate") {
  // Pods of 4 nodes with one 400G NIC each, 2 nodes per leaf: a leaf has 2 × 50 GB/s up over 2
  // spines, so a spine has 2 × 50 GB/s down and, at 2:1, 50 GB/s up: one port, so one link at
  // 50 GB/s to one of the 4 cores (it had 4 links of 12.5 GB/s, slower than a port).
  const auto doc = Json::parse(R"({
    "name": "t", "nodes": 8,
    "node": {
      "gpu": "H100-SXM5-80GB",
      "vertices": [{"name": "gpu", "kind": "gpu"}, {"name": "nic", "kind": "nic"}],
      "links": [{"a": "gpu", "b": "nic", "kind": "pcie", "bandwidth_GBps": 64, "latency_ns": 100}]
    },
    "fabric": {"kind": "fat_tree", "link": {"kind": "infiniband", "bandwidth_Gbps": 400,
               "latency_ns": 500}, "rail_optimized": false, "leaf_down_ports": 2, "spines": 2,
               "oversubscription": 1, "pod_nodes": 4, "cores": 4, "core_oversubscription": 2}
  })");
  const auto t = load_topology_json(doc, "t.json");
  const auto& g = t.graph();
  for (const char* spine : {"spine/p0/0", "spine/p0/1", "spine/p1/0", "spine/p1/1"}) {
    int links = 0;
    for (auto [e, end] = boost::out_edges(*t.find(spine), g); e != end; ++e)
      if (t.vertex(boost::target(*e, g)).kind == VertexKind::core_switch) {
        ++links;
        CHECK(g[*e].bandwidth_Bps == doctest::Approx(50e9));
      }
    CHECK(links == 1);
  }
  // Spine s of every pod reaches core s, so the pods still meet.
  Router router(t);
  CHECK(router.gpu_route(0, 7).hops() == 8);  // gpu nic leaf spine core spine leaf nic gpu
}

TEST_CASE("gb200-nvl72: 72 GPUs per NVLink domain at 900 GB/s per direction") {
  const auto t = load("gb200-nvl72.json");
  const auto s = summarize(t, false);
  CHECK(s.gpus == 8 * 72);
  CHECK(t.gpus_per_node() == 72);
  CHECK(s.vertices.at("nvswitch") == 8 * 18);
  CHECK(s.nvlink_Bps == doctest::Approx(900e9));
  CHECK(s.links.at("nvlink_network") == 8 * 72 * 18);
}

TEST_CASE("explicit form: vertices and links written out") {
  const auto t = load("lab-2node-explicit.json");
  CHECK(t.gpu_count() == 4);
  CHECK(t.node_count() == 2);
  CHECK(t.vertex(*t.find("tor")).node == -1);
  CHECK(t.vertex(t.gpus()[2]).name == "b/gpu0");
}

TEST_CASE("every bundled topology loads") {
  for (const char* name :
       {"dgx-a100.json", "dgx-h100.json", "hgx-h200.json", "pcie-8gpu.json",
        "dgx-a100-superpod.json", "dgx-h100-superpod.json", "dgx-h100-superpod-2to1.json",
        "gb200-nvl72.json", "h100-16k.json", "lab-2node-explicit.json"}) {
    CAPTURE(name);
    const auto t = load(name);
    CHECK(t.gpu_count() > 0);
    CHECK(!t.sources.empty());
  }
}
