#include <doctest/doctest.h>

#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {

// A minimal valid node: two GPUs on one NVSwitch.
Json base() {
  return Json::parse(R"({
    "name": "t",
    "node": {
      "gpu": "H100-SXM5-80GB",
      "vertices": [{"name": "gpu", "kind": "gpu", "count": 2}, {"name": "sw", "kind": "nvswitch"}],
      "links": [{"a": "gpu", "b": "sw", "kind": "nvlink", "bandwidth_GBps": 450, "latency_ns": 100}]
    },
    "fabric": {"kind": "none"}
  })");
}

std::string error_of(const Json& doc, TopologyOptions opt = {}) {
  try {
    load_topology_json(doc, topology_path("bad.json"), opt);
  } catch (const Error& e) {
    const std::string msg = e.what();
    const auto prefix = topology_path("bad.json") + ":";
    return msg.starts_with(prefix) ? msg.substr(prefix.size()) : "UNEXPECTED PREFIX " + msg;
  }
  return "no error";
}

}  // namespace

TEST_CASE("the base document is valid") {
  CHECK(error_of(base()) == "no error");
}

TEST_CASE("malformed JSON") {
  try {
    parse_json_text("{\"name\": \"x\",,}", "bad.json");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).starts_with("bad.json:line 1 column 14: malformed JSON"));
  }
}

TEST_CASE("missing file") {
  CHECK_THROWS_WITH_AS(load_topology("/nonexistent/x.json"),
                       "/nonexistent/x.json: cannot open file", Error);
}

TEST_CASE("unknown keys anywhere are rejected") {
  auto d = base();
  d["typo"] = 1;
  CHECK(error_of(d).starts_with("/typo: unknown key 'typo'"));
  d = base();
  d["node"]["links"][0]["bandwith_GBps"] = 1;
  CHECK(error_of(d).starts_with("/node/links/0/bandwith_GBps: unknown key"));
  d = base();
  d["node"]["vertices"][0]["colour"] = "red";
  CHECK(error_of(d).starts_with("/node/vertices/0/colour: unknown key"));
}

TEST_CASE("unknown kinds") {
  auto d = base();
  d["node"]["vertices"][1]["kind"] = "hub";
  CHECK(error_of(d).starts_with("/node/vertices/1/kind: unknown vertex kind 'hub' (known: gpu,"));
  d = base();
  d["node"]["links"][0]["kind"] = "carrier_pigeon";
  CHECK(error_of(d).starts_with("/node/links/0/kind: unknown link kind 'carrier_pigeon'"));
  d = base();
  d["node"]["gpu"] = "Z80";
  CHECK(error_of(d).starts_with("/node/gpu: unknown GPU model 'Z80'"));
  d = base();
  d["fabric"]["kind"] = "torus";
  CHECK(error_of(d).starts_with("/fabric/kind: unknown fabric kind 'torus'"));
}

TEST_CASE("missing fields") {
  auto d = base();
  d["node"]["links"][0].erase("b");
  CHECK(error_of(d) == "/node/links/0: missing required field 'b'");
  d = base();
  d["node"]["links"][0].erase("latency_ns");
  CHECK(error_of(d) == "/node/links/0: missing latency (latency_s / latency_us / latency_ns)");
  d = base();
  d.erase("name");
  CHECK(error_of(d) == "/: missing required field 'name'");
  d = base();
  d["node"].erase("vertices");
  CHECK(error_of(d) == "/node: missing required field 'vertices'");
}

TEST_CASE("zero and negative bandwidth, negative latency") {
  auto d = base();
  d["node"]["links"][0]["bandwidth_GBps"] = 0;
  CHECK(error_of(d) == "/node/links/0/bandwidth_GBps: must be greater than zero");
  d["node"]["links"][0]["bandwidth_GBps"] = -5;
  CHECK(error_of(d) == "/node/links/0/bandwidth_GBps: must be greater than zero");
  d = base();
  d["node"]["links"][0]["latency_ns"] = -1;
  CHECK(error_of(d) == "/node/links/0/latency_ns: must not be negative");
  d = base();
  d["node"]["links"][0]["bandwidth_Gbps"] = 8;
  CHECK(error_of(d) == "/node/links/0/bandwidth_Gbps: give only one bandwidth field");
}

TEST_CASE("dangling link endpoints") {
  auto d = base();
  d["node"]["links"][0]["b"] = "sw7";
  CHECK(error_of(d) == "/node/links/0/b: unknown vertex 'sw7'");
  d = base();
  d["node"]["links"][0]["b"] = "gpu";
  d["node"]["links"][0]["pattern"] = "all_pairs";
  CHECK(error_of(d) == "/node/links/0: link from vertex 'gpu0' to itself");
}

TEST_CASE("GPUs that cannot reach each other") {
  auto d = base();
  d["node"]["links"][0]["a"] = "gpu0";  // gpu1 is left unconnected
  CHECK(error_of(d) == "/: GPU 'n0/gpu1' cannot reach GPU 'n0/gpu0' (no path of links)");
  // Two nodes need a fabric, and NICs to attach it to.
  d = base();
  d["nodes"] = 2;
  CHECK(error_of(d).starts_with("/fabric: several nodes need a fabric"));
  d["fabric"] = Json::parse(
      R"({"kind": "single_switch", "link": {"kind": "ethernet", "bandwidth_Gbps": 100, "latency_ns": 1}})");
  CHECK(error_of(d) == "/node/vertices: several nodes need NICs in the node to reach each other");
}

TEST_CASE("structural errors") {
  auto d = base();
  d["node"]["vertices"][0]["count"] = 0;
  CHECK(error_of(d) == "/node/vertices/0/count: must be a positive integer");
  d = base();
  d["node"]["vertices"].push_back({{"name", "gpu1"}, {"kind", "cpu"}});
  CHECK(error_of(d) == "/node/vertices/2/name: duplicate vertex name 'gpu1'");
  d = base();
  d["node"]["vertices"].push_back({{"name", "sw2"}, {"kind", "nvswitch"}, {"count", 3}});
  d["node"]["links"].push_back(
      {{"a", "gpu"}, {"b", "sw2"}, {"kind", "nvlink"}, {"bandwidth_GBps", 1}, {"latency_ns", 1}});
  CHECK(error_of(d).starts_with("/node/links/1: cannot map 2 vertices onto 3"));
  d = base();
  d["node"]["links"][0]["pattern"] = "ring";
  CHECK(error_of(d) == "/node/links/0/pattern: unknown pattern 'ring' (known: map, all_pairs)");
  d = base();
  d["node"] = 5;
  CHECK(error_of(d) == "/node: expected an object, found number");
  CHECK(error_of(Json::array()) == "/: expected an object, found array");
  d = base();
  d["node_from"] = "dgx-h100.json";
  CHECK(error_of(d) == "/node_from: give either 'node' or 'node_from', not both");
  d = base();
  d.erase("node");
  d["node_from"] = "missing.json";
  CHECK(error_of(d).starts_with("/node_from: cannot find node file"));
}

TEST_CASE("--nodes is checked") {
  CHECK(error_of(base(), TopologyOptions{0}) == "--nodes: must be a positive integer");
  const auto explicit_doc = load_json_file(topology_path("lab-2node-explicit.json"));
  try {
    load_topology_json(explicit_doc, "lab.json", TopologyOptions{4});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).starts_with("lab.json:--nodes: this is an explicit topology"));
  }
  try {
    load_topology(topology_path("dgx-h100-superpod.json"), TopologyOptions{200'000});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).ends_with(
        "--nodes: 200000 nodes of 8 GPUs is more than the supported 262144 GPUs"));
  }
  // 2^60 nodes: nodes × GPUs would overflow; the check divides instead.
  Json big = load_json_file(topology_path("dgx-h100-superpod.json"));
  big["nodes"] = std::int64_t{1} << 60;
  big["node_from"] = topology_path("dgx-h100.json");
  CHECK_THROWS_WITH_AS(load_topology_json(big, "big.json"),
                       "big.json:/nodes: 1152921504606846976 nodes of 8 GPUs is more than the "
                       "supported 262144 GPUs",
                       Error);
}

TEST_CASE("size budgets: links and vertices are counted before they are expanded") {
  // Issue 19: a 700-byte file with an all_pairs between two 4,096-vertex groups took > 5.3 GB.
  auto d = base();
  d["node"]["vertices"] = Json::parse(
      R"([{"name": "gpu", "kind": "gpu", "count": 4096},
          {"name": "sw", "kind": "nvswitch", "count": 4096}])");
  d["node"]["links"][0]["pattern"] = "all_pairs";
  CHECK(error_of(d) ==
        "/node/links/0: 16777216 links is more than the supported 4194304 (this would need "
        "~10.7 GB at ~0.64 KB per link) (an all_pairs of 4096 × 4096)");
  // Groups of at most 4,096 vertices each, but enough of them: the 512th passes 2^21.
  d = base();
  for (int i = 0; i < 512; ++i)
    d["node"]["vertices"].push_back(
        {{"name", "x" + std::to_string(i) + "_"}, {"kind", "cpu"}, {"count", 4096}});
  CHECK(error_of(d) == "/node/vertices/513: 2097155 vertices is more than the supported 2097152");
  // A cluster of many nodes: nodes × the node's links, before any node is stamped out.
  Json many = load_json_file(topology_path("dgx-h100-superpod.json"));
  many["node_from"] = topology_path("gb200-nvl72.json");
  many["nodes"] = 3600;  // 259,200 GPUs: under the GPU limit, over the link budget
  try {
    load_topology_json(many, "many.json");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).starts_with("many.json:/nodes: 3600 nodes of "));
    CHECK(std::string(e.what()).find("links is more than the supported 4194304") !=
          std::string::npos);
  }
}

TEST_CASE("physical ceilings: a quantity that would scale past double range is refused") {
  // Issue 19: 1e308 GB/s printed inf and left the max-min solver with an unrated flow.
  auto d = base();
  d["node"]["links"][0]["bandwidth_GBps"] = 1e308;
  CHECK(error_of(d) == "/node/links/0/bandwidth_GBps: must be at most 1e+06");
  d = base();
  d["node"]["links"][0].erase("bandwidth_GBps");
  d["node"]["links"][0]["bandwidth_Gbps"] = 1e308;  // the limit in the key's own unit
  CHECK(error_of(d) == "/node/links/0/bandwidth_Gbps: must be at most 8e+06");
  d = base();
  d["node"]["links"][0]["latency_ns"] = 1e300;
  CHECK(error_of(d) == "/node/links/0/latency_ns: must be at most 1e+12");
  d = base();
  d["node"]["gpu"] = Json::parse(
      R"({"model": "X", "peak_tflops": {"bf16": 1e308}, "hbm_bytes": "80G", "hbm_GBps": 3350,
          "sm_count": 132})");
  CHECK(error_of(d) == "/node/gpu/peak_tflops/bf16: must be at most 1e+06");
  d["node"]["gpu"]["peak_tflops"]["bf16"] = 989;
  d["node"]["gpu"]["hbm_GBps"] = 1e308;
  CHECK(error_of(d) == "/node/gpu/hbm_GBps: must be at most 1e+06");
}

TEST_CASE("a GPU object's L2 size: optional, no larger than its memory") {
  auto d = base();
  d["node"]["gpu"] = Json::parse(
      R"({"model": "X", "peak_tflops": {"bf16": 989}, "hbm_bytes": "80G", "hbm_GBps": 3350,
          "sm_count": 132})");
  const auto l2_of = [](const Json& gpu) {
    return read_gpu_spec(JsonRef::root(gpu, "t.json")).l2_bytes.count();
  };
  CHECK(error_of(d) == "no error");
  CHECK(l2_of(d["node"]["gpu"]) == 0);  // none given: no L2 term
  d["node"]["gpu"]["l2_bytes"] = "50M";
  CHECK(error_of(d) == "no error");
  CHECK(l2_of(d["node"]["gpu"]) == 50u << 20);
  d["node"]["gpu"]["l2_bytes"] = "81G";
  CHECK(error_of(d) == "/node/gpu/l2_bytes: an L2 cache larger than the GPU's memory");
  d["node"]["gpu"]["l2_bytes"] = -1;
  CHECK(error_of(d) == "/node/gpu/l2_bytes: byte count must not be negative");
  // The catalogue's, as the whitepapers give them (and PyTorch read them on an H100 and an H200).
  CHECK(find_gpu("A100-SXM4-80GB")->l2_bytes.count() == 40u << 20);
  CHECK(find_gpu("H100-SXM5-80GB")->l2_bytes.count() == 50u << 20);
  CHECK(find_gpu("H200-SXM-141GB")->l2_bytes.count() == 60u << 20);
  CHECK(find_gpu("B200-SXM-180GB")->l2_bytes.count() == 0);
}
