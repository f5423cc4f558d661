#include "topology/nccl_topo_xml.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "test_paths.hpp"
#include "topology/router.hpp"
#include "topology/topology_loader.hpp"
#include "topology/topology_summary.hpp"

using namespace meshsim;

TEST_CASE("an NCCL topology dump becomes a cluster file of the node") {
  const auto xml = meshsim::test::source_path("tools/calibrate/examples/nccl-topo-dgx-h100.xml");
  const Json j = nccl_topo_to_topology(xml, {});
  const auto topo = load_topology_json(j, "node.json");
  CHECK(topo.gpu_count() == 8);
  CHECK(topo.gpu.model == "H100-SXM5-80GB");
  const auto s = summarize(topo, false);
  CHECK(s.vertices.at("nvswitch") == 4);
  CHECK(s.vertices.at("pcie_switch") == 4);
  CHECK(s.vertices.at("cpu") == 2);
  CHECK(s.vertices.at("nic") == 8);
  // 18 NVLink4 links per GPU (5 + 4 + 4 + 5) at 25 GB/s; PCIe Gen5 x16 after 128b/130b.
  CHECK(s.nvlink_Bps == doctest::Approx(450e9));
  CHECK(s.pcie_Bps == doctest::Approx(32e9 * 16 / 8 * 128 / 130));
  // Every GPU pair is reachable over the NVSwitches.
  Router router(topo);
  CHECK(router.gpu_route(0, 7).hops() == 2);
}

TEST_CASE("unreadable NCCL topology dumps name the file") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto bad = (dir / "ms_bad_topo.xml").string();
  std::ofstream(bad) << "<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n";
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(bad, {}), doctest::Contains("ms_bad_topo.xml"), Error);
  const auto empty = (dir / "ms_empty_topo.xml").string();
  std::ofstream(empty) << "<system version=\"1\"><cpu numaid=\"0\"/></system>\n";
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(empty, {}), doctest::Contains("no <gpu>"), Error);
  const auto other = (dir / "ms_other.xml").string();
  std::ofstream(other) << "<html/>\n";
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(other, {}), doctest::Contains("<system>"), Error);
}

TEST_CASE("NCCL topology attributes are parsed strictly, naming the element") {
  // Issue 19: count="five" silently became one link.
  const auto dir = std::filesystem::temp_directory_path();
  const auto write = [&](const std::string& name, const std::string& gpu_attrs,
                         const std::string& pci_attrs) {
    const auto p = (dir / name).string();
    std::ofstream(p) << "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:18:00.0\" "
                     << pci_attrs << "><gpu dev=\"0\" " << gpu_attrs
                     << "><nvlink target=\"0000:05:00.0\" count=\"five\" "
                        "tclass=\"0x068000\"/></gpu></pci></cpu></system>\n";
    return p;
  };
  const std::string pcie = R"(link_speed="32.0 GT/s PCIe" link_width="16")";
  const auto five = write("ms_five.xml", R"(sm="90")", pcie);
  CHECK_THROWS_WITH_AS(
      nccl_topo_to_topology(five, {}),
      (five + ":pci 0000:18:00.0/gpu/nvlink @count: 'five' is not a number").c_str(), Error);
  const auto sm = write("ms_sm.xml", R"(sm="9.5")", pcie);
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(sm, {}),
                       (sm + ":pci 0000:18:00.0/gpu @sm: '9.5' is not an integer").c_str(), Error);
  const auto speed = write("ms_speed.xml", R"(sm="90")", R"(link_speed="fast" link_width="16")");
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(speed, {}),
                       doctest::Contains("@link_speed: 'fast' is not a PCIe speed"), Error);
  // No speed anywhere up the tree: the dump is blamed, not the converted output file.
  const auto none = write("ms_nospeed.xml", R"(sm="90")", "");
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(none, {}),
                       (none + ":pci 0000:18:00.0 @link_speed: no PCIe link speed and width here "
                               "or on any parent; the device's bandwidth is unknown")
                           .c_str(),
                       Error);
}

TEST_CASE(
    "a dump whose first NIC has no speed still links the later NICs (found by fuzz_nccl_xml)") {
  const auto xml = meshsim::test::source_path("tests/fuzz/corpus/nccl_xml/first-nic-no-speed.xml");
  const auto topo = load_topology_json(nccl_topo_to_topology(xml, {}), "node.json");
  CHECK(topo.gpu_count() == 2);
  const auto s = summarize(topo, false);
  CHECK(s.vertices.at("nic") == 2);
  CHECK(s.vertices.at("leaf_switch") == 2);  // one per rail of the assumed fat tree
}

TEST_CASE("the node read from a dump is a template: --nodes N and node_from stamp it out") {
  const auto xml = meshsim::test::source_path("tools/calibrate/examples/nccl-topo-dgx-h100.xml");
  const Json j = nccl_topo_to_topology(xml, {});
  CHECK(j["fabric"]["kind"] == "fat_tree");
  CHECK(j["fabric"]["link"]["bandwidth_Gbps"] == 400.0);  // the dump's NIC speed
  CHECK(j["sources"].back().get<std::string>().starts_with("Fabric (not in the dump, assumed)"));
  TopologyOptions four;
  four.nodes = 4;
  const auto cluster = load_topology_json(j, "node.json", four);
  CHECK(cluster.gpu_count() == 32);
  CHECK(cluster.node_count() == 4);
  Router router(cluster);
  // GPU 0 of node 0 to GPU 0 of node 3: PCIe to its NIC, the rail's leaf, back down.
  CHECK(router.gpu_route(0, 24).hops() >= 4);
  // Another cluster file takes its node from the written one.
  const auto dir = std::filesystem::temp_directory_path() / "meshsim_node_from";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "node.json") << j.dump();
  std::ofstream(dir / "pod.json") << R"({"name": "pod", "node_from": "node.json", "nodes": 16,
      "fabric": {"kind": "fat_tree", "link": {"kind": "infiniband", "bandwidth_Gbps": 400,
      "latency_ns": 500}, "rail_optimized": true, "leaf_down_ports": 8, "spines": 8,
      "oversubscription": 2}})";
  const auto pod = load_topology((dir / "pod.json").string(), {});
  CHECK(pod.gpu_count() == 128);
  CHECK(pod.gpu.model == "H100-SXM5-80GB");
}

TEST_CASE("an NVLink to the GPU's own bus id is an error naming it (found by fuzz_nccl_xml)") {
  const auto xml = meshsim::test::source_path("tests/fuzz/corpus/nccl_xml/nvlink-to-itself.xml");
  CHECK_THROWS_WITH_AS(nccl_topo_to_topology(xml, {}),
                       (xml + ":pci 0000:02:00.0/gpu/nvlink @target: '0000:02:00.0' is this GPU's "
                              "own bus id (an NVLink to itself)")
                           .c_str(),
                       Error);
}
