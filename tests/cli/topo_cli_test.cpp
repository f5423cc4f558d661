#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using meshsim::test::run_cli;
using meshsim::test::topology_path;
using nlohmann::json;

TEST_CASE("topo --json on dgx-h100: 8 GPUs, 4 NVSwitches, 450 GB/s NVLink per direction") {
  const auto r = run_cli("topo --topology " + topology_path("dgx-h100.json") + " --json");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto j = json::parse(r.out);
  CHECK(j["gpus"] == 8);
  CHECK(j["nodes"] == 1);
  CHECK(j["vertices"]["nvswitch"] == 4);
  CHECK(j["per_gpu_Bps"]["nvlink"].get<double>() == doctest::Approx(450e9));
  CHECK(j["per_gpu_Bps"]["pcie"].get<double>() == doctest::Approx(64e9));
  CHECK(j["gpu"]["model"] == "H100-SXM5-80GB");
  CHECK(j["gpu"]["peak_flops"]["bf16"].get<double>() == 989e12);
  CHECK(j["gpu"]["hbm_bytes"] == 80ull << 30);
  CHECK(j["gpu"]["hbm_Bps"].get<double>() == 3.35e12);
  CHECK(j["gpu"]["l2_bytes"] == 50ull << 20);
  CHECK(j["bisection_Bps"].get<double>() == doctest::Approx(1840e9));
  CHECK(j["path_classes"][0][1] == "NVL");
  CHECK(j["links"]["nvlink"] == 32);
}

TEST_CASE("topo on the H100 superpod: 512 GPUs, 16,384 with --nodes 2048") {
  auto r = run_cli("topo --topology " + topology_path("dgx-h100-superpod.json") + " --json");
  REQUIRE(r.exit_code == 0);
  auto j = json::parse(r.out);
  CHECK(j["gpus"] == 512);
  CHECK(j["per_gpu_Bps"]["network"].get<double>() == doctest::Approx(50e9));
  CHECK(j["bisection_Bps"].get<double>() == doctest::Approx(12.8e12));
  CHECK(!j.contains("path_classes"));  // only printed for up to 16 GPUs

  r = run_cli("topo --topology " + topology_path("dgx-h100-superpod.json") +
              " --nodes 2048 --json");
  REQUIRE(r.exit_code == 0);
  j = json::parse(r.out);
  CHECK(j["gpus"] == 16384);
  CHECK(j["nodes"] == 2048);
  // Full bisection: 8,192 GPUs x 50 GB/s.
  CHECK(j["bisection_Bps"].get<double>() == doctest::Approx(8192 * 50e9));
}

TEST_CASE("topo text output has the path-class matrix") {
  const auto r = run_cli("topo --topology " + topology_path("pcie-8gpu.json"));
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("cluster    pcie-8gpu (1 node, 8 GPUs)") != std::string::npos);
  CHECK(r.out.find("GPU0     LOC   PIX   PHB   PHB   SYS   SYS   SYS   SYS") != std::string::npos);
}

TEST_CASE("topo --dot writes Graphviz") {
  const auto dot = std::filesystem::temp_directory_path() / "meshsim_topo_test.dot";
  const auto r =
      run_cli("topo --topology " + topology_path("dgx-a100.json") + " --dot " + dot.string());
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dot);
  std::string first;
  std::getline(in, first);
  CHECK(first == "digraph G {");
  std::filesystem::remove(dot);
}

TEST_CASE("bad input: one error line, exit 2") {
  const auto bad_dir = std::filesystem::temp_directory_path() / "meshsim_bad_topo";
  std::filesystem::create_directories(bad_dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto p = bad_dir / name;
    std::ofstream(p) << text;
    return p.string();
  };
  struct Case {
    std::string args, expected_error_suffix;  // the part after "error: <file>"
  };
  const std::string ok_link =
      R"("links": [{"a": "gpu", "b": "sw", "kind": "nvlink", "bandwidth_GBps": 450, "latency_ns": 100}])";
  const std::string verts =
      R"("vertices": [{"name": "gpu", "kind": "gpu", "count": 2}, {"name": "sw", "kind": "nvswitch"}])";
  auto node = [&](const std::string& links) {
    return R"({"name": "t", "fabric": {"kind": "none"}, "node": {"gpu": "H100-SXM5-80GB", )" +
           verts + ", " + links + "}}";
  };
  const Case cases[] = {
      {"--topology " + write("malformed.json", "{\"name\": "), ":line 1 column 10: malformed JSON"},
      {"--topology " + write("unknown_key.json", node(ok_link).insert(1, "\"extra\": 1, ")),
       ":/extra: unknown key 'extra'"},
      {"--topology " +
           write(
               "zero_bw.json",
               node(
                   R"("links": [{"a": "gpu", "b": "sw", "kind": "nvlink", "bandwidth_GBps": 0, "latency_ns": 1}])")),
       ":/node/links/0/bandwidth_GBps: must be greater than zero"},
      {"--topology " +
           write(
               "dangling.json",
               node(
                   R"("links": [{"a": "gpu", "b": "nope", "kind": "nvlink", "bandwidth_GBps": 1, "latency_ns": 1}])")),
       ":/node/links/0/b: unknown vertex 'nope'"},
      {"--topology " +
           write(
               "bad_kind.json",
               node(
                   R"("links": [{"a": "gpu", "b": "sw", "kind": "wifi", "bandwidth_GBps": 1, "latency_ns": 1}])")),
       ":/node/links/0/kind: unknown link kind 'wifi' (known: nvlink, nvlink_network, pcie, "
       "cpu_interconnect, c2c, infiniband, ethernet)"},
      {"--topology " +
           write(
               "missing.json",
               node(
                   R"("links": [{"a": "gpu", "kind": "nvlink", "bandwidth_GBps": 1, "latency_ns": 1}])")),
       ":/node/links/0: missing required field 'b'"},
      {"--topology " +
           write(
               "unreachable.json",
               node(
                   R"("links": [{"a": "gpu0", "b": "sw", "kind": "nvlink", "bandwidth_GBps": 1, "latency_ns": 1}])")),
       ":/: GPU 'n0/gpu1' cannot reach GPU 'n0/gpu0' (no path of links)"},
      {"--topology /no/such/file.json", "/no/such/file.json: cannot open file"},
      {"--topology " + topology_path("dgx-h100-superpod.json") + " --nodes -3",
       "--nodes: '-3': must be a positive integer"},
      {"--topology " + topology_path("dgx-h100-superpod.json") + " --nodes 0",
       "--nodes: '0': must be a positive integer"},
      {"--topology " + topology_path("dgx-h100-superpod.json") + " --nodes many",
       "--nodes: 'many': must be a positive integer"},
      {"--topology " + topology_path("lab-2node-explicit.json") + " --nodes 4",
       "--nodes: this is an explicit topology; --nodes needs a parametric file (one with 'node' "
       "and 'fabric')"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const auto r = run_cli("topo " + c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    REQUIRE(!r.err.empty());
    CHECK(r.err.starts_with("error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    const std::string line = r.err.substr(0, r.err.size() - 1);
    CHECK(line.find(c.expected_error_suffix) != std::string::npos);
  }
  std::filesystem::remove_all(bad_dir);
}

TEST_CASE("the same command twice gives the same bytes") {
  const auto args = "topo --topology " + topology_path("dgx-h100-superpod-2to1.json") + " --json";
  CHECK(run_cli(args).out == run_cli(args).out);
}

TEST_CASE("no subcommand or an unknown one is a usage error") {
  CHECK(run_cli("").exit_code == 2);
  CHECK(run_cli("frobnicate").exit_code == 2);
  CHECK(run_cli("topo --help").exit_code == 0);
}

TEST_CASE("topo prints the GPU's L2 size, or says it is unknown") {
  auto r = run_cli("topo --topology " + topology_path("dgx-h100.json"));
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("HBM 80.0 GiB at 3350 GB/s; L2 50 MiB\n") != std::string::npos);
  r = run_cli("topo --topology " + topology_path("gb200-nvl72.json"));
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("at 8000 GB/s; L2 size unknown\n") != std::string::npos);
  r = run_cli("topo --topology " + topology_path("gb200-nvl72.json") + " --json");
  CHECK(json::parse(r.out)["gpu"]["l2_bytes"] == 0);
}
