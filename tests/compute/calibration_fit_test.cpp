#include "compute/calibration_fit.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "compute/compute_model.hpp"
#include "compute/kernel_time.hpp"
#include "compute/kineto_trace.hpp"
#include "json_near.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {

FitResult fit_file(const std::string& path, FitOptions opt = {}) {
  const Json doc = load_json_file(path);
  return fit_calibration(JsonRef::root(doc, path), opt);
}

std::string fit_error(const Json& doc) {
  try {
    (void)fit_calibration(JsonRef::root(doc, "raw.json"), {});
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("calibrate fit: the bundled raw harness example becomes a profile") {
  const auto fit = fit_file(source_path("tools/calibrate/examples/h100-raw-example.json"));
  const auto& p = fit.profile;
  CHECK(p.gpu == "H100-SXM5-80GB");
  CHECK(p.gemm.size() == 5);
  CHECK(p.attention.size() == 1);  // the unfused row is left out
  // Memory: the example is 3 µs + bytes / 2.97 TB/s exactly.
  REQUIRE(p.memory_bandwidth_Bps);
  CHECK(*p.memory_bandwidth_Bps == doctest::Approx(2.97e12).epsilon(1e-6));
  CHECK(p.launch_overhead->seconds() == doctest::Approx(3e-6).epsilon(1e-3));
  REQUIRE(p.links.p2p.size() == 1);
  CHECK(p.links.p2p[0].kind == LinkKind::nvlink);
  CHECK(p.links.p2p[0].regimes.back().bandwidth_Bps == doctest::Approx(370e9).epsilon(1e-3));
  CHECK(p.links.p2p[0].regimes.back().alpha_s == doctest::Approx(10e-6).epsilon(1e-3));
  REQUIRE(p.links.collectives.size() == 1);
  // NVIDIA's DGX H100 all-reduce sweep: large messages at ~270 GB/s algbw (~475 busbw).
  CHECK(p.links.collectives[0].regimes.back().bandwidth_Bps ==
        doctest::Approx(268e9).epsilon(0.02));
  // The fitted profile round-trips and drives the compute model: the GEMM points are exact.
  const Json j = to_json(p);
  const auto back = read_calibration_profile(JsonRef::root(j, "p.json"));
  CHECK(meshsim::test::json_near(to_json(back), j));
  const ComputeModel cm(*find_gpu(p.gpu), back);
  for (const auto& pt : p.gemm) {
    const auto k = gemm_kernel(pt.shape, pt.dtype);
    CHECK(k.flops / cm.seconds(k) == doctest::Approx(pt.flops_per_s));
  }
  FitOptions with;
  with.include_unfused_attention = true;
  CHECK(fit_file(source_path("tools/calibrate/examples/h100-raw-example.json"), with)
            .profile.attention.size() == 2);
}

TEST_CASE("calibrate fit: bad raw files name the JSON path") {
  const Json good = load_json_file(source_path("tools/calibrate/examples/h100-raw-example.json"));
  Json bad = good;
  bad.erase("harness");
  CHECK(fit_error(bad).find("harness") != std::string::npos);
  bad = good;
  bad["environment"]["gpus"][0]["name"] = "Mystery Accelerator";
  CHECK(fit_error(bad).find("--gpu") != std::string::npos);
  bad = good;
  bad["gemm"][2]["time_us"] = -1;
  CHECK(fit_error(bad).find("/gemm/2/time_us") != std::string::npos);
  bad = good;
  bad["p2p"][0]["link"] = "smoke_signal";
  CHECK(fit_error(bad).find("/p2p/0/link") != std::string::npos);
  bad = good;
  bad["nccl"][0]["op"] = "all_shout";
  CHECK(fit_error(bad).find("/nccl/0/op") != std::string::npos);
  bad = good;
  bad["surprise"] = 1;
  CHECK(fit_error(bad).find("surprise") != std::string::npos);
}

TEST_CASE("profile interpolation is monotone between its points and exact on them") {
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.source = "test";
  const double rates[] = {350e12, 560e12, 640e12, 700e12};
  const std::int64_t sizes[] = {1024, 2048, 4096, 8192};
  for (int i = 0; i < 4; ++i)
    p.gemm.push_back({DType::bf16, {sizes[i], sizes[i], sizes[i], 1}, rates[i]});
  const ComputeModel cm(*find_gpu(p.gpu), p);
  for (int i = 0; i < 4; ++i) {
    const auto k = gemm_kernel({sizes[i], sizes[i], sizes[i], 1}, DType::bf16);
    CHECK(cm.seconds(k) == doctest::Approx(k.flops / rates[i]));
  }
  double last = 0;
  for (std::int64_t n = 1024; n <= 8192; n += 64) {
    const double t = cm.seconds(gemm_kernel({n, n, n, 1}, DType::bf16));
    INFO("n = " << n);
    CHECK(t >= last);
    last = t;
  }
}

TEST_CASE("a Kineto trace reads as per-step kernel times by kind and GEMM shapes") {
  const auto k =
      read_kineto_trace(source_path("tools/calibrate/examples/kineto-step-example.json"));
  CHECK(k.steps == 2);
  CHECK(k.step_s == doctest::Approx(1.0));
  // Per step: 32 layers × (520 + 350 + 2400 + 1200) µs of GEMMs, 32 × 900 µs of attention,
  // 32 × 150 µs elementwise, one 60 ms all-reduce; device 1's kernel is not counted.
  CHECK(k.gemm_s == doctest::Approx(32 * 4470e-6));
  CHECK(k.attention_s == doctest::Approx(32 * 900e-6));
  CHECK(k.other_compute_s == doctest::Approx(32 * 150e-6));
  CHECK(k.comm_s.at("all_reduce") == doctest::Approx(0.06));
  REQUIRE(k.gemm_points.size() == 4);
  for (const auto& p : k.gemm_points) {
    CHECK(p.dtype == DType::bf16);
    CHECK(p.shape.m == 8192);
  }
  // The host launches a kernel every 20 µs (4 µs calls; one blocked for 300 µs, as a full launch
  // queue blocks, is counted as 4) and synchronizes at each step's end: per step 32 · 6 + 1
  // launches, so 2 · 192 = 384 gaps, none across a synchronization.
  REQUIRE(k.host_per_kernel_s);
  CHECK(*k.host_per_kernel_s == doctest::Approx(20e-6).scale(0));
  CHECK(k.launch_call_s == doctest::Approx(4e-6).scale(0));
  CHECK(k.launch_gaps == 384);
  CHECK(nccl_kernel_op("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "reduce_scatter");
  CHECK(nccl_kernel_op("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "send_recv");
  CHECK(nccl_kernel_op("sm90_xmma_gemm_bf16") == "");
  CHECK_THROWS_WITH_AS(
      read_kineto_trace(source_path("tools/calibrate/examples/kineto-step-example.json"), 5),
      doctest::Contains("no GPU kernel events for device 5"), Error);
}

TEST_CASE("Kineto host launches: gaps on the busiest thread, blocked calls and syncs left out") {
  // Thread 1 launches 18 kernels 15 µs apart (calls of 3 µs), the 6th call blocked for 103 µs
  // (its successor 100 µs later than 15: counted as 15), a cudaDeviceSynchronize after the 12th
  // (the gap across it is left out); thread 2 launches 3 kernels; a kernel on the GPU. 16 gaps of
  // 15 µs. (A synchronizing call is cudaDeviceSynchronize and its kin or a blocking memcpy.)
  Json events = Json::array();
  double ts = 0;
  for (int i = 0; i < 18; ++i) {
    const double dur = i == 5 ? 103 : 3;
    events.push_back({{"ph", "X"},
                      {"cat", "cuda_runtime"},
                      {"name", "cudaLaunchKernel"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", ts},
                      {"dur", dur}});
    ts += 15 + (dur - 3);
    if (i == 11) {
      events.push_back({{"ph", "X"},
                        {"cat", "cuda_runtime"},
                        {"name", "cudaDeviceSynchronize"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", ts - 10},
                        {"dur", 500}});
      ts += 600;
    }
  }
  // An asynchronous copy between the 2nd and 3rd launches does not block: that pair counts.
  events.push_back({{"ph", "X"},
                    {"cat", "cuda_runtime"},
                    {"name", "cudaMemcpyAsync"},
                    {"pid", 1},
                    {"tid", 1},
                    {"ts", 20},
                    {"dur", 2}});
  for (int i = 0; i < 3; ++i)
    events.push_back({{"ph", "X"},
                      {"cat", "cuda_runtime"},
                      {"name", "cudaLaunchKernel"},
                      {"pid", 1},
                      {"tid", 2},
                      {"ts", 7.0 * i},
                      {"dur", 1}});
  events.push_back(
      {{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"dur", 10}, {"args", {{"device", 0}}}});
  Json doc{{"traceEvents", events}};
  auto k = read_kineto_json(doc, "t.json");
  CHECK(k.launch_gaps == 16);
  REQUIRE(k.host_per_kernel_s);
  CHECK(*k.host_per_kernel_s == doctest::Approx(15e-6).scale(0));
  CHECK(k.launch_call_s == doctest::Approx(3e-6).scale(0));
  // A blocking copy there drops that pair: 15 gaps are too few to measure.
  for (auto& e : doc["traceEvents"])
    if (e["name"] == "cudaMemcpyAsync") e["name"] = "cudaMemcpy";
  k = read_kineto_json(doc, "t.json");
  CHECK(k.launch_gaps == 15);
  CHECK_FALSE(k.host_per_kernel_s);
  // A runtime event without a usable time is an error naming it.
  doc["traceEvents"][2]["ts"] = "soon";
  CHECK_THROWS_WITH_AS(read_kineto_json(doc, "t.json"), doctest::Contains("t.json:/traceEvents/2"),
                       Error);
  // The profile carries it, strictly.
  CalibrationProfile p;
  p.gpu = "H100-SXM5-80GB";
  p.source = "test";
  p.host_per_kernel_s = 15e-6;
  const Json written = to_json(p);
  CHECK(written["host_per_kernel_us"].get<double>() == doctest::Approx(15));
  CHECK(*read_calibration_profile(JsonRef::root(written, "p.json")).host_per_kernel_s ==
        doctest::Approx(15e-6).scale(0));
  Json bad = written;
  bad["host_per_kernel_us"] = -2;
  CHECK_THROWS_WITH_AS(read_calibration_profile(JsonRef::root(bad, "p.json")),
                       doctest::Contains("/host_per_kernel_us"), Error);
  // The compute model takes it, else the harness's bare launch cost, else nothing.
  const auto gpu = *find_gpu("H100-SXM5-80GB");
  CHECK(ComputeModel(gpu, p).host_per_kernel_s() == 15e-6);
  p.host_per_kernel_s.reset();
  p.host_launch_s = 2.5e-6;
  CHECK(ComputeModel(gpu, p).host_per_kernel_s() == 2.5e-6);
  CHECK(ComputeModel(gpu).host_per_kernel_s() == 0);
}

TEST_CASE("Kineto GEMM dimensions: floats are not shapes, huge integers are errors (fuzz_kineto)") {
  // Two mm ops with kernels: one with a float dimension (2.2e78 converted to an integer was
  // undefined behaviour), one with 2^40 rows.
  const auto doc = Json::parse(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 1,
     "args": {"External id": 1, "Input Dims": [[2.2e78, 64], [64, 64]],
              "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {"ph": "X", "cat": "kernel", "name": "nvjet_a", "dur": 10,
     "args": {"device": 0, "External id": 1}}]})");
  const auto k = read_kineto_json(doc, "t.json");
  CHECK(k.kernels == 1);
  CHECK(k.gemm_points.empty());  // not a GEMM point, and no undefined conversion
  auto huge = doc;
  huge["traceEvents"][0]["args"]["Input Dims"][0][0] = std::int64_t{1} << 40;
  CHECK_THROWS_WITH_AS(read_kineto_json(huge, "t.json"),
                       "t.json:/traceEvents/0/args/Input Dims: GEMM 1099511627776×64×64 (batch 1) "
                       "has a dimension past 2^24",
                       Error);
}

TEST_CASE("calibrate fit: interference rows decide how a GEMM beside a collective is priced") {
  // A one-wave GEMM (132 tiles of 128×256) beside 24 held SMs, and 8192³ beside 16; the rows'
  // slowdowns made by one launch model or the other must be recognised as that model.
  const auto gpu = *find_gpu("H100-SXM5-80GB");
  const auto params = ComputeModel(gpu).params();
  const auto factor = [&](GemmShape s, int held, bool for_all) {
    const auto k = gemm_kernel(s, DType::bf16);
    return kernel_seconds(k, gpu, params, {held, for_all}) / kernel_seconds(k, gpu, params);
  };
  const GemmShape wave{1536, 2816, 8192}, square{8192, 8192, 8192};
  const auto raw = [&](bool for_all) {
    Json doc = {{"harness", "meshsim-calibrate 1"},
                {"environment", {{"gpus", {{{"name", "NVIDIA H100 80GB HBM3"}}}}}},
                {"interference", Json::array()}};
    for (const auto& [s, held] : {std::pair{wave, 24}, std::pair{square, 16}})
      doc["interference"].push_back({{"dtype", "bf16"},
                                     {"m", s.m},
                                     {"n", s.n},
                                     {"k", s.k},
                                     {"sms", 132},
                                     {"held_sms", held},
                                     {"planned_for", 132},
                                     {"alone_us", 100.0},
                                     {"beside_us", 100.0 * factor(s, held, for_all)}});
    // A GEMM planned for the SMs left (TE's margin) is reported, not used to decide.
    doc["interference"].push_back({{"dtype", "bf16"},
                                   {"m", 8192},
                                   {"n", 8192},
                                   {"k", 8192},
                                   {"sms", 132},
                                   {"held_sms", 24},
                                   {"planned_for", 108},
                                   {"alone_us", 100.0},
                                   {"beside_us", 103.0}});
    return doc;
  };
  // The one-wave grid: two rounds of its 132 CTAs on 108 SMs when launched for all.
  CHECK(factor(wave, 24, true) > 1.6);
  for (const bool for_all : {true, false}) {
    const Json doc = raw(for_all);
    const auto fit = fit_calibration(JsonRef::root(doc, "raw.json"), {});
    REQUIRE(fit.profile.gemm_launched_for_all_sms);
    CHECK(*fit.profile.gemm_launched_for_all_sms == for_all);
    std::string said;
    for (const auto& l : fit.lines) said += l + "\n";
    CHECK(said.find("1536×2816×8192, 24 of 132 SMs held: measured " +
                    fmt::format("{:.2f}", factor(wave, 24, for_all))) != std::string::npos);
    CHECK(said.find("planned for the 108 left: measured 1.03×") != std::string::npos);
    // The profile says it, and reads back.
    const Json written = to_json(fit.profile);
    CHECK(written["gemm_beside_collective"] ==
          (for_all ? "launched_for_all_sms" : "planned_for_sms_left"));
    CHECK(read_calibration_profile(JsonRef::root(written, "p.json")).gemm_launched_for_all_sms ==
          for_all);
  }
  // Bad rows name their path.
  Json bad = raw(true);
  bad["interference"][0]["held_sms"] = 132;
  CHECK(fit_error(bad).find("/interference/0/held_sms") != std::string::npos);
  bad = raw(true);
  bad["interference"][1]["planned_for"] = 100;
  CHECK(fit_error(bad).find("/interference/1/planned_for") != std::string::npos);
  bad = raw(true);
  bad["interference"][0]["dtype"] = "fp8";
  CHECK(fit_error(bad).find("/interference/0/dtype") != std::string::npos);
  bad = raw(true);
  bad["interference"][0]["beside"] = 1;
  CHECK(fit_error(bad).find("beside") != std::string::npos);
  Json profile = to_json(fit_calibration(JsonRef::root(raw(true), "raw.json"), {}).profile);
  profile["gemm_beside_collective"] = "sometimes";
  CHECK_THROWS_WITH_AS(read_calibration_profile(JsonRef::root(profile, "p.json")),
                       doctest::Contains("/gemm_beside_collective"), Error);
}

TEST_CASE("calibrate fit: launch rows give the gap between kernels and the host's launch cost") {
  // Spinning kernels of 20 and 50 µs back to back: 21.2 and 51.4 µs per kernel launched one by
  // one (gaps 1.2 and 1.4 µs: median 1.3), 20.6 and 50.6 in a graph (0.6), host 2.5 µs a launch.
  const auto raw = [] {
    Json doc = {{"harness", "meshsim-calibrate 1"},
                {"environment", {{"gpus", {{{"name", "NVIDIA H100 80GB HBM3"}}}}}},
                {"launch", Json::array()}};
    for (const auto& [mode, kernel, per] : {std::tuple{"eager", 20.0, 21.2},
                                            {"graph", 20.0, 20.6},
                                            {"eager", 50.0, 51.4},
                                            {"graph", 50.0, 50.6}})
      doc["launch"].push_back(
          {{"mode", mode}, {"kernels", 500}, {"kernel_us", kernel}, {"per_kernel_us", per}});
    doc["launch"].push_back({{"mode", "host"}, {"kernels", 500}, {"per_launch_us", 2.5}});
    return doc;
  };
  const auto fit = fit_calibration(JsonRef::root(raw(), "raw.json"), {});
  const auto& p = fit.profile;
  REQUIRE(p.kernel_gap_s);
  REQUIRE(p.graph_kernel_gap_s);
  REQUIRE(p.host_launch_s);
  CHECK(*p.kernel_gap_s == doctest::Approx(1.3e-6));
  CHECK(*p.graph_kernel_gap_s == doctest::Approx(0.6e-6));
  CHECK(*p.host_launch_s == doctest::Approx(2.5e-6));
  std::string said;
  for (const auto& l : fit.lines) said += l + "\n";
  CHECK(said.find("launch: 1.30 µs between kernels launched one by one, 0.60 µs in a CUDA graph; "
                  "host 2.50 µs per launch (rows: 5)") != std::string::npos);
  // The profile says it, and reads back.
  const Json written = to_json(p);
  CHECK(written["kernel_gap_us"].get<double>() == doctest::Approx(1.3));
  const auto back = read_calibration_profile(JsonRef::root(written, "p.json"));
  REQUIRE(back.kernel_gap_s);
  CHECK(*back.kernel_gap_s == doctest::Approx(1.3e-6));
  CHECK(*back.host_launch_s == doctest::Approx(2.5e-6));
  // A raw file without the section leaves them unset.
  Json none = raw();
  none.erase("launch");
  CHECK_FALSE(fit_calibration(JsonRef::root(none, "raw.json"), {}).profile.kernel_gap_s);
  // Bad rows name their path.
  Json bad = raw();
  bad["launch"][0]["per_kernel_us"] = 19.0;  // faster than the kernel itself
  CHECK(fit_error(bad).find("/launch/0/per_kernel_us: must be at least kernel_us") !=
        std::string::npos);
  bad = raw();
  bad["launch"][1]["mode"] = "async";
  CHECK(fit_error(bad).find("/launch/1/mode") != std::string::npos);
  bad = raw();
  bad["launch"][4].erase("per_launch_us");
  CHECK(fit_error(bad).find("/launch/4") != std::string::npos);
  bad = raw();
  bad["launch"][2]["extra"] = 1;
  CHECK(fit_error(bad).find("extra") != std::string::npos);
  Json profile = written;
  profile["kernel_gap_us"] = -1;
  CHECK_THROWS_WITH_AS(read_calibration_profile(JsonRef::root(profile, "p.json")),
                       doctest::Contains("/kernel_gap_us"), Error);
}
