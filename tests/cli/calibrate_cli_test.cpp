#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

using meshsim::test::run_cli;
using meshsim::test::source_path;
using nlohmann::json;

namespace {

std::string example(const std::string& name) {
  return source_path("tools/calibrate/examples/" + name);
}

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

json read(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

}  // namespace

TEST_CASE("calibrate fit: raw harness output and an nccl-tests log make a profile") {
  const auto out = temp("meshsim_fit_profile.json");
  const auto topo_out = temp("meshsim_fit_node.json");
  const auto r = run_cli("calibrate fit --raw " + example("h100-raw-example.json") +
                         " --nccl-tests " + example("dgx-h100-all_reduce_perf.log") + " --out " +
                         out + " --topology-out " + topo_out);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("gemm: 5 shapes") != std::string::npos);
  CHECK(r.out.find("all_reduce on 8 ranks, 1 node(s) from") != std::string::npos);
  const auto p = read(out);
  CHECK(p["gpu"] == "H100-SXM5-80GB");
  CHECK(p["links"]["collectives"].size() == 1);  // the log's fit replaced the raw file's
  CHECK(read(topo_out)["name"] == "example-node");
  // nccl-tests alone, GPU named by the log.
  const auto only = run_cli("calibrate fit --nccl-tests " +
                            example("dgx-h100-all_reduce_perf.log") + " --out " + out);
  REQUIRE_MESSAGE(only.exit_code == 0, only.err);
  CHECK(read(out)["gemm"].is_null());
}

TEST_CASE("calibrate nccl-topo: an NCCL topology dump becomes a usable cluster file") {
  const auto out = temp("meshsim_nccl_node.json");
  const auto r =
      run_cli("calibrate nccl-topo --xml " + example("nccl-topo-dgx-h100.xml") + " --out " + out);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("# wrote " + out + ": one node read from the NCCL topology dump ") == 0);
  CHECK(r.out.find("8 GPUs, 4 NVSwitches") != std::string::npos);
  CHECK(r.out.find(" (GPU H100-SXM5-80GB)\n") != std::string::npos);
  const auto topo = run_cli("topo --topology " + out + " --json");
  REQUIRE_MESSAGE(topo.exit_code == 0, topo.err);
  CHECK(json::parse(topo.out)["gpus"] == 8);
  const auto coll =
      run_cli("collective --topology " + out + " --op all_reduce --gpus 8 --sizes 1G");
  CHECK(coll.exit_code == 0);
  // "Calibrate one node, extrapolate to the cluster": the file is a node template.
  const auto four = run_cli("topo --topology " + out + " --nodes 4 --json");
  REQUIRE_MESSAGE(four.exit_code == 0, four.err);
  CHECK(json::parse(four.out)["gpus"] == 32);
  const auto across = run_cli("collective --topology " + out +
                              " --nodes 4 --op all_reduce --gpus 32 --sizes 1G --json");
  REQUIRE_MESSAGE(across.exit_code == 0, across.err);
}

TEST_CASE("calibrate kineto: measured per-op times next to the simulated step") {
  const auto prof = temp("meshsim_kineto_profile.json");
  const auto r = run_cli("calibrate kineto --trace " + example("kineto-step-example.json") +
                         " --topology " + source_path("topologies/dgx-h100.json") + " --workload " +
                         source_path("workloads/models/llama3.1-8b.json") +
                         " --mesh dp=8 --seq 8192 --gbs 8 --write-profile " + prof);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("2 profiled step(s)") != std::string::npos);
  CHECK(r.out.find("nccl all_reduce") != std::string::npos);
  CHECK(r.out.find("4 GEMM shapes") != std::string::npos);
  CHECK(r.out.find("model ") != std::string::npos);
  CHECK(r.out.find("# host: 20.00 µs per kernel launched (median of 384 launch-to-launch gaps") !=
        std::string::npos);
  const auto p = read(prof);
  CHECK(p["gemm"].size() == 4);
  CHECK(p["host_per_kernel_us"].get<double>() == doctest::Approx(20));
  // The host time trains with the profile: a host stream, its wait reported.
  const auto train = run_cli("train --topology " + source_path("topologies/dgx-h100.json") +
                             " --workload " + source_path("workloads/models/llama3.1-8b.json") +
                             " --mesh dp=8 --zero 3 --seq 1024 --gbs 8 --stack torchtitan" +
                             " --calibration " + prof);
  REQUIRE_MESSAGE(train.exit_code == 0, train.err);
  CHECK(train.out.find("host 20.00 µs per kernel launched") != std::string::npos);
  CHECK(train.out.find("waiting for host") != std::string::npos);
  const auto train_json =
      run_cli("train --topology " + source_path("topologies/dgx-h100.json") + " --workload " +
              source_path("workloads/models/llama3.1-8b.json") +
              " --mesh dp=8 --zero 3 --seq 1024 --gbs 8 --stack torchtitan" + " --calibration " +
              prof + " --json");
  REQUIRE_MESSAGE(train_json.exit_code == 0, train_json.err);
  CHECK(json::parse(train_json.out)["host_wait_s"].get<double>() > 0);
  // The trace's GEMM times, used as a profile, make the model hit them exactly.
  const auto with = run_cli("calibrate kineto --trace " + example("kineto-step-example.json") +
                            " --topology " + source_path("topologies/dgx-h100.json") +
                            " --workload " + source_path("workloads/models/llama3.1-8b.json") +
                            " --mesh dp=8 --seq 8192 --gbs 8 --calibration " + prof);
  REQUIRE_MESSAGE(with.exit_code == 0, with.err);
  CHECK(with.out.find("(+0.0%)") != std::string::npos);
  // --json: the same rows as one document; the GEMM model times equal the measured ones.
  const auto js = run_cli("calibrate kineto --trace " + example("kineto-step-example.json") +
                          " --topology " + source_path("topologies/dgx-h100.json") +
                          " --workload " + source_path("workloads/models/llama3.1-8b.json") +
                          " --mesh dp=8 --seq 8192 --gbs 8 --calibration " + prof + " --json");
  REQUIRE_MESSAGE(js.exit_code == 0, js.err);
  const auto j = json::parse(js.out);
  CHECK(j["steps"] == 2);
  CHECK(j["simulated"]["mesh"]["dp"] == 8);
  REQUIRE(j["gemm"].size() == 4);
  for (const auto& g : j["gemm"])
    CHECK(g["model_s"].get<double>() == doctest::Approx(g["measured_s"].get<double>()));
  bool all_reduce = false;
  for (const auto& part : j["parts"]) {
    CHECK(part["measured_s"].get<double>() >= 0);
    if (part["part"] == "nccl all_reduce") all_reduce = part.contains("simulated_s");
  }
  CHECK(all_reduce);
}

TEST_CASE("calibrate kineto: nothing to write is one error line, and no report before it") {
  // Kernels only: no aten::mm shapes (record_shapes) and no launches (ProfilerActivity.CPU).
  json trace = read(example("kineto-step-example.json"));
  json kernels = json::array();
  for (const auto& e : trace["traceEvents"])
    if (e["cat"] == "kernel") kernels.push_back(e);
  trace["traceEvents"] = kernels;
  const auto in = temp("meshsim_kineto_kernels_only.json");
  std::ofstream(in) << trace.dump();
  const auto prof = temp("meshsim_kineto_nothing.json");
  std::filesystem::remove(prof);
  const auto args = "calibrate kineto --trace " + in + " --topology " +
                    source_path("topologies/dgx-h100.json") + " --workload " +
                    source_path("workloads/models/llama3.1-8b.json") +
                    " --mesh dp=8 --seq 8192 --gbs 8";
  const auto r = run_cli(args + " --write-profile " + prof);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());  // before, the whole comparison was printed ahead of the error
  CHECK(r.err.rfind("error: " + in + ": no GEMM shapes", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(prof));
  // Without --write-profile the same trace is read: the comparison, and how to measure the host.
  const auto ok = run_cli(args);
  REQUIRE_MESSAGE(ok.exit_code == 0, ok.err);
  CHECK(ok.out.find("# host: not measured") != std::string::npos);
  CHECK(ok.out.find("GEMM shapes") == std::string::npos);
}

TEST_CASE("calibrate fit and nccl-topo take --json") {
  const auto out = temp("meshsim_fit_profile_json.json");
  const auto fit = run_cli("calibrate fit --raw " + example("h100-raw-example.json") + " --out " +
                           out + " --json");
  REQUIRE_MESSAGE(fit.exit_code == 0, fit.err);
  const auto f = json::parse(fit.out);
  CHECK(f["gpu"] == "H100-SXM5-80GB");
  CHECK(f["out"] == out);
  CHECK(f["profile"] == read(out));  // the document is the file written
  CHECK(!f["fits"].empty());

  const auto node = temp("meshsim_nccl_node_json.json");
  const auto topo = run_cli("calibrate nccl-topo --xml " + example("nccl-topo-dgx-h100.xml") +
                            " --out " + node + " --json");
  REQUIRE_MESSAGE(topo.exit_code == 0, topo.err);
  const auto t = json::parse(topo.out);
  CHECK(t["gpus"] == 8);
  CHECK(t["gpu"] == "H100-SXM5-80GB");
  CHECK(t["per_gpu_Bps"]["nvlink"].get<double>() > 100e9);
}

TEST_CASE("a profile's collective fit moves collective, train and serve results") {
  const auto prof = temp("meshsim_coll_profile.json");
  REQUIRE(run_cli("calibrate fit --nccl-tests " + example("dgx-h100-all_reduce_perf.log") +
                  " --out " + prof)
              .exit_code == 0);
  const std::string coll = "collective --topology " + source_path("topologies/dgx-h100.json") +
                           " --op all_reduce --gpus 8 --sizes 8G --json";
  const auto plain = json::parse(run_cli(coll).out);
  const auto cal = run_cli(coll + " --calibration " + prof);
  REQUIRE_MESSAGE(cal.exit_code == 0, cal.err);
  const auto calibrated = json::parse(cal.out);
  // 8 GiB: the fitted large-message regime, α + S/β with β ≈ 267 GB/s algbw (the log: 274).
  const double t = calibrated["rows"][0]["time_s"].get<double>();
  CHECK(t == doctest::Approx(8589934592.0 / 267.5e9).epsilon(0.02));
  CHECK(t != doctest::Approx(plain["rows"][0]["time_s"].get<double>()));
  // A profile with the collective twice as fast halves a bandwidth-bound all-reduce.
  auto fast = read(prof);
  for (auto& reg : fast["links"]["collectives"][0]["regimes"])
    reg["GBps"] = 2 * reg["GBps"].get<double>();
  const auto fast_file = temp("meshsim_coll_fast.json");
  std::ofstream(fast_file) << fast.dump();
  const double tf =
      json::parse(run_cli(coll + " --calibration " + fast_file).out)["rows"][0]["time_s"]
          .get<double>();
  CHECK(tf == doctest::Approx(t / 2).epsilon(0.01));
  // Training with TP 8: the TP all-reduces take the measured level.
  const std::string train = "train --topology " + source_path("topologies/dgx-h100.json") +
                            " --workload " + source_path("workloads/models/llama3.1-8b.json") +
                            " --mesh tp=8 --sp off --seq 4096 --gbs 8 --json";
  const auto t_plain = json::parse(run_cli(train).out);
  const auto t_cal = run_cli(train + " --calibration " + fast_file);
  REQUIRE_MESSAGE(t_cal.exit_code == 0, t_cal.err);
  CHECK(json::parse(t_cal.out)["step_time_s"].get<double>() < t_plain["step_time_s"].get<double>());
}

TEST_CASE("a cluster file can name its calibration profile") {
  auto topo = read(source_path("topologies/dgx-h100.json"));
  topo["calibration"] = source_path("topologies/calibration/h100-sxm-default.json");
  const auto file = temp("meshsim_named_profile.json");
  std::ofstream(file) << topo.dump();
  const auto r = run_cli("train --topology " + file + " --workload " +
                         source_path("workloads/models/llama3.1-8b.json") +
                         " --mesh dp=8 --seq 4096 --gbs 8 --zero 3 --json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  topo["calibration"] = "no-such-profile.json";
  std::ofstream(file) << topo.dump();
  const auto bad = run_cli("train --topology " + file + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") + " --mesh dp=8");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("no-such-profile.json") != std::string::npos);
}

TEST_CASE("calibrate: bad input is one error line") {
  const std::pair<std::string, std::string> cases[] = {
      {"calibrate fit --out /tmp/x.json", "--raw"},
      {"calibrate fit --raw /nonexistent.json --out /tmp/x.json", "nonexistent"},
      {"calibrate nccl-topo --xml " + example("dgx-h100-all_reduce_perf.log") +
           " --out /tmp/x.json",
       "dgx-h100-all_reduce_perf.log"},
      {"calibrate fit --nccl-tests " + example("nccl-topo-dgx-h100.xml") + " --out /tmp/x.json",
       "no result rows"},
  };
  for (const auto& [args, want] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    const auto r = run_cli(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("calibrate fit: an unknown --gpu or --nccl-op is an error, not a default") {
  const std::string base = "calibrate fit --raw " +
                           source_path("tools/calibrate/examples/h100-raw-example.json") +
                           " --out /tmp/meshsim_unused_profile.json ";
  const auto gpu = run_cli(base + "--gpu Z100");
  CHECK(gpu.exit_code == 2);
  CHECK(gpu.err.starts_with("error: --gpu: unknown GPU 'Z100'"));
  const auto op = run_cli(base + "--nccl-op frob");
  CHECK(op.exit_code == 2);
  CHECK(op.err.starts_with("error: --nccl-op: 'frob' is not a collective"));
}

TEST_CASE("calibrate fit: a launch section's gap is paid by every kernel of a train run") {
  // Raw rows as the harness's `launch` section writes them (20 µs kernels measuring 21.5 µs each
  // when launched one by one: a 1.5 µs gap), fitted, then used on the bundled 8B on one DGX.
  const auto raw = temp("meshsim_launch_raw.json");
  const auto prof = temp("meshsim_launch_profile.json");
  {
    std::ofstream f(raw);
    f << json{{"harness", "meshsim-calibrate 1"},
              {"environment", {{"gpus", {{{"name", "NVIDIA H100 80GB HBM3"}}}}}},
              {"launch",
               {{{"mode", "eager"}, {"kernels", 500}, {"kernel_us", 20}, {"per_kernel_us", 21.5}},
                {{"mode", "host"}, {"kernels", 500}, {"per_launch_us", 3}}}}}
             .dump();
  }
  const auto fit = run_cli("calibrate fit --raw " + raw + " --out " + prof);
  REQUIRE_MESSAGE(fit.exit_code == 0, fit.err);
  CHECK(fit.out.find("launch: 1.50 µs between kernels launched one by one, not measured in a "
                     "CUDA graph; host 3.00 µs per launch (rows: 2)") != std::string::npos);
  CHECK(read(prof)["kernel_gap_us"].get<double>() == doctest::Approx(1.5));
  const std::string train = "train --topology " + source_path("topologies/dgx-h100.json") +
                            " --workload " + source_path("workloads/models/llama3.1-8b.json") +
                            " --mesh dp=8 --zero 3 --seq 8192 --gbs 8 --stack torchtitan --json";
  const auto plain = run_cli(train);
  const auto gapped = run_cli(train + " --calibration " + prof);
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
  REQUIRE_MESSAGE(gapped.exit_code == 0, gapped.err);
  const double a = json::parse(plain.out)["step_time_s"],
               b = json::parse(gapped.out)["step_time_s"];
  // Thousands of kernels a step at 1.5 µs each: milliseconds, not more than a few per cent.
  CHECK(b - a > 1e-3);
  CHECK(b - a < 0.03 * a);
}
