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
