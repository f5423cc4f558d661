#include "report/chrome_trace.hpp"

#include <doctest/doctest.h>
#include <sys/resource.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <streambuf>

#include "model/model_loader.hpp"
#include "stack/stack.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"
#include "training/training_sim.hpp"

using namespace meshsim;

namespace {

TrainingResult step(const std::string& cluster, std::int32_t nodes, const std::string& model,
                    const std::string& mesh, std::int64_t seq, std::int64_t gbs, bool full) {
  const auto topo = load_topology(test::topology_path(cluster), {nodes});
  TrainingSetup s;
  s.job = {seq, gbs, 1, DType::bf16, true};
  s.config.mesh = parse_mesh(mesh, "--mesh");
  s.config.sp = s.config.mesh.tp > 1;
  s.config.zero = 1;
  s.full = full;
  return simulate_training(topo, load_model(test::model_path(model)), s);
}

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024;  // Linux: KiB
}

struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace

TEST_CASE("trace: slices named by kind, with micro-batch, layer and bytes; PP flow arrows") {
  const auto r = step("dgx-h100.json", 1, "llama3.1-8b", "tp=2,pp=2,dp=2", 2048, 8, true);
  std::stringstream out;
  write_chrome_trace(r.trace, r.replay, out);
  const auto j = nlohmann::json::parse(out.str());
  std::map<std::string, int> names;
  int starts = 0, finishes = 0;
  // Per (pid, tid), slices in time order must not overlap: a stream runs one op at a time.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> lanes;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") ++starts;
    if (e["ph"] == "f") ++finishes;
    if (e["ph"] != "X") continue;
    ++names[e["name"].get<std::string>()];
    lanes[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
        {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    const auto& a = e["args"];
    // A communication slice keeps its op's own name (the segment it serves); a compute
    // slice's is its name, phase, micro-batch and layer.
    CHECK(a.contains("op") == (e["cat"] == "comm"));
    if (e["name"] == "qkv") {
      CHECK(a["phase"] == "forward");
      CHECK(a["microbatch"].get<int>() >= 0);
      CHECK(a["layer"].get<int>() >= 0);
    }
    if (e["cat"] == "comm") CHECK(a["bytes"].get<double>() >= 0);
  }
  // Aggregatable names, not one per op: 4 micro-batches × 16 layers of each kind per rank.
  CHECK(names["qkv"] == 4 * 16 * 8);
  // Megatron's QKV backward runs as three slices: the segment's other kernels, then the dgrad
  // beside the input's re-gather and the wgrad beside the reduce-scatter (Stack::tp_backward).
  CHECK(names["qkv.backward"] == 3 * 4 * 16 * 8);
  CHECK(names.contains("tp_all_gather"));
  CHECK(names.contains("pp_send_recv"));
  CHECK(names.size() < 60);
  CHECK(starts > 0);
  CHECK(starts == finishes);
  for (auto& [lane, slices] : lanes) {
    std::sort(slices.begin(), slices.end());
    for (std::size_t i = 1; i < slices.size(); ++i)
      CHECK(slices[i].first >= slices[i - 1].second - 1e-6);
  }
}

TEST_CASE("trace: interference shows on the slices it stretched, adding up to train's totals") {
  // torchtitan on one DGX H100, FSDP over 8 (folded: one simulated rank): its eager elementwise
  // kernels run beside NVLink all-gathers and reduce-scatters. Each compute slice carries how
  // much longer it ran than alone, each collective the time it lost to HBM sharing and waited
  // for a kernel's SMs; summed they are the step's interference_s and comm_interference_s.
  const auto topo = load_topology(test::topology_path("dgx-h100.json"));
  TrainingSetup s;
  s.job = {4096, 8, 1, DType::bf16, true};
  s.config.mesh = parse_mesh("dp=8", "--mesh");
  s.config.zero = 3;
  s.strategy.stack = *bundled_stack("torchtitan");
  const auto r = simulate_training(topo, load_model(test::model_path("llama3.1-8b")), s);
  REQUIRE(r.simulated_ranks == 1);
  REQUIRE(r.interference_s > 0);
  REQUIRE(r.comm_interference_s > 0);
  std::stringstream out;
  write_chrome_trace(r.trace, r.replay, out);
  double compute_us = 0, comm_us = 0;
  const auto j = nlohmann::json::parse(out.str());
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto& a = e["args"];
    if (a.contains("interference_us")) {
      CHECK(e["cat"] == "compute");
      compute_us += a["interference_us"].get<double>();
    }
    for (const char* wait : {"hbm_wait_us", "sm_wait_us"})
      if (a.contains(wait)) {
        CHECK(e["cat"] == "comm");
        comm_us += a[wait].get<double>();
      }
  }
  // Each slice rounds to a nanosecond: thousands of slices, well under 0.1 %.
  CHECK(compute_us * 1e-6 == doctest::Approx(r.interference_s).epsilon(1e-3).scale(0));
  CHECK(comm_us * 1e-6 == doctest::Approx(r.comm_interference_s).epsilon(1e-3).scale(0));
}

TEST_CASE("trace: the host's launches on their own lane, one slice per op launched") {
  // A profile that measured 10 µs of host time a launch: every GPU slice has a launch slice
  // (category "host") on the rank's host lane, as long as its kernels × 10 µs.
  const auto topo = load_topology(test::topology_path("dgx-h100.json"));
  TrainingSetup s;
  s.job = {1024, 8, 1, DType::bf16, true};
  s.config.mesh = parse_mesh("dp=8", "--mesh");
  s.strategy.stack = *bundled_stack("megatron");
  CalibrationProfile p;
  p.gpu = topo.gpu.model;
  p.source = "test";
  p.host_per_kernel_s = 10e-6;
  s.profile = p;
  const auto r = simulate_training(topo, load_model(test::model_path("llama3.1-8b")), s);
  std::stringstream out;
  write_chrome_trace(r.trace, r.replay, out);
  const auto j = nlohmann::json::parse(out.str());
  std::size_t host = 0, gpu = 0;
  std::set<std::int64_t> host_lanes;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "host") {
      ++host;
      host_lanes.insert(e["tid"].get<std::int64_t>());
      const double us = e["dur"].get<double>();
      CHECK(std::fmod(us + 1e-6, 10.0) < 1e-3);  // whole launches of 10 µs
    } else {
      ++gpu;
    }
  }
  CHECK(host == gpu);
  CHECK(host_lanes.size() == 1);
}

TEST_CASE("trace: the writer streams, so a --full 64-GPU trace adds no memory to the step") {
  // Llama 3.1 70B, TP 8 × PP 4 × DP 2 on 8 DGX H100, every rank simulated: ~0.3 M slices. The
  // whole-trace JSON document it replaced took 1.4 GB more than the step here (issue 18).
  const auto r =
      step("dgx-h100-superpod.json", 8, "llama3.1-70b", "tp=8,pp=4,dp=2", 4096, 16, true);
  const double before = peak_rss_bytes();
  NullBuffer buffer;
  std::ostream out(&buffer);
  write_chrome_trace(r.trace, r.replay, out);
  const double added = peak_rss_bytes() - before;
  MESSAGE("trace of ", r.trace.graph.op_count(), " ops added ", added / 1e6, " MB to the peak");
  CHECK(r.trace.graph.op_count() > 100000);
  CHECK(added <= 100e6);
}
