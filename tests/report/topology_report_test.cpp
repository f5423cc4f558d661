#include "report/topology_report.hpp"

#include <doctest/doctest.h>

#include "../test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;

TEST_CASE("topology report: counts, per-GPU bandwidths, bisection and the path classes") {
  const Topology topo = load_topology(test::topology_path("dgx-h100.json"));
  // A hand-built summary: the report prints what it is given.
  TopologySummary s;
  s.gpus = 2;
  s.nodes = 1;
  s.vertices = {{"gpu", 2}, {"nvswitch", 1}};
  s.links = {{"nvlink4", 2}};
  s.nvlink_Bps = 450e9;
  s.pcie_Bps = 64e9;
  s.network_Bps = 50e9;
  s.bisection_Bps = 900e9;
  const TopologyReport r{
      &topo, s, {{PathClass::LOC, PathClass::NVL}, {PathClass::NVL, PathClass::LOC}}};
  const auto text = topology_text(r);
  CHECK(text.find("cluster    dgx-h100 (1 node, 2 GPUs)\n") == 0);
  CHECK(text.find("gpu        H100-SXM5-80GB: bf16 989, fp16 989, fp8 1979, tf32 494.5 TFLOP/s "
                  "dense; HBM 80.0 GiB at 3350 GB/s; L2 50 MiB\n") != std::string::npos);
  CHECK(text.find("vertices   gpu 2, nvswitch 1\nlinks      nvlink4 2\n") != std::string::npos);
  CHECK(text.find("per GPU    nvlink 450 GB/s, pcie 64 GB/s, network 50 GB/s (each direction)\n") !=
        std::string::npos);
  CHECK(text.find("bisection  900 GB/s") != std::string::npos);
  const std::string loc(name_of(PathClass::LOC)), nvl(name_of(PathClass::NVL));
  CHECK(text.find("\n        GPU0  GPU1\nGPU0  " + std::string(6 - loc.size(), ' ') + loc +
                  std::string(6 - nvl.size(), ' ') + nvl + "\n") != std::string::npos);
  const auto j = topology_json(r);
  CHECK(j["name"] == "dgx-h100");
  CHECK(j["gpus"] == 2);
  CHECK(j["per_gpu_Bps"]["pcie"] == 64e9);
  CHECK(j["vertices"]["nvswitch"] == 1);
  REQUIRE(j["path_classes"].size() == 2);
  CHECK(j["path_classes"][0][1] == std::string(name_of(PathClass::NVL)));
  CHECK(j["per_gpu_Bps"]["c2c"] == 0);
  // NVLink-C2C is listed where the GPU has it (a Grace CPU's GPUs), between PCIe and the network.
  TopologySummary grace = s;
  grace.pcie_Bps = 0;
  grace.c2c_Bps = 225e9;
  const TopologyReport gr{&topo, grace, {}};
  CHECK(topology_text(gr).find("per GPU    nvlink 450 GB/s, pcie 0 GB/s, c2c 225 GB/s, network "
                               "50 GB/s (each direction)\n") != std::string::npos);
  CHECK(topology_json(gr)["per_gpu_Bps"]["c2c"] == 225e9);
  // A cluster too large to list has no matrix, and says nothing of paths.
  const TopologyReport big{&topo, s, {}};
  CHECK(topology_text(big).find("path classes") == std::string::npos);
  CHECK_FALSE(topology_json(big).contains("path_classes"));
}
