#include "report/kineto_report.hpp"

#include <doctest/doctest.h>

using namespace meshsim;

namespace {

// Rank 0: 0.6 s of compute and a 0.3 s all-reduce the trace also has, and a 0.1 s reduce-scatter
// it does not; rank 1's ops, rank 0's host launches and an unfinished op are not counted.
TrainingResult simulated() {
  TrainingResult r;
  r.step_time_s = 1.1;
  auto add = [&](std::int32_t rank, bool comm, bool host, std::string_view kind, Time start,
                 Time end) {
    TraceOpInfo info;
    info.rank = rank;
    info.comm = comm;
    info.host = host;
    info.kind = kind;
    r.trace.info.push_back(info);
    r.replay.ops.push_back({start, end});
  };
  add(0, false, false, "compute", Time::ms(0), Time::ms(400));
  add(0, false, false, "compute", Time::ms(400), Time::ms(600));
  add(0, true, false, "all_reduce", Time::ms(600), Time::ms(900));
  add(0, true, false, "reduce_scatter", Time::ms(900), Time::ms(1000));
  add(1, false, false, "compute", Time::ms(0), Time::ms(700));
  add(0, false, true, "host", Time::ms(0), Time::ms(50));
  add(0, false, false, "compute", Time::ms(0), Time::max());
  return r;
}

KinetoSummary measured() {
  KinetoSummary m;
  m.device = 0;
  m.steps = 2;
  m.step_s = 1.0;
  m.gemm_s = 0.5;
  m.attention_s = 0.2;
  m.other_compute_s = 0.1;
  m.comm_s = {{"all_gather", 0.05}, {"all_reduce", 0.25}};
  m.kernels = 42;
  // 2 · 1024³ = 2.147 GFLOP at 1,000 TFLOP/s: 2.1 µs.
  m.gemm_points = {{DType::bf16, {1024, 1024, 1024, 1}, 1e15}};
  m.host_per_kernel_s = 12e-6;
  m.launch_call_s = 3e-6;
  m.launch_gaps = 99;
  return m;
}

}  // namespace

TEST_CASE("kineto report: rank 0's busy time per part beside the trace's, with the error") {
  const auto r = simulated();
  const auto m = measured();
  const ComputeModel kernels(*find_gpu("H100-SXM5-80GB"));
  const KinetoComparison c{"t.json", &m, "c", {8, 1, 1, 1, 1, 0}, &r, &kernels};
  const auto parts = kineto_parts(c);
  REQUIRE(parts.size() == 8);
  CHECK(parts[0].part == "step (wall)");
  CHECK(*parts[0].simulated_s == 1.1);
  CHECK(parts[1].part == "compute kernels");
  CHECK(parts[1].measured_s == doctest::Approx(0.8));
  CHECK(*parts[1].simulated_s == doctest::Approx(0.6));
  CHECK_FALSE(parts[2].simulated_s);  // the simulation does not split compute by kind
  CHECK(parts[5].part == "nccl all_gather");
  CHECK_FALSE(parts[5].simulated_s);
  CHECK(parts[6].part == "nccl all_reduce");
  CHECK(*parts[6].simulated_s == doctest::Approx(0.3));
  CHECK(parts[7].part == "nccl reduce_scatter");
  CHECK(parts[7].measured_s == 0);

  const auto text = kineto_text(c);
  CHECK(text.find("# t.json: device 0, 42 kernels, 2 profiled step(s)\n# simulated: meshsim train "
                  "of the same job on c (") == 0);
  CHECK(text.find("step (wall)                1.0000       1.1000   +10.0%\n") !=
        std::string::npos);
  CHECK(text.find("compute kernels            0.8000       0.6000   -25.0%\n") !=
        std::string::npos);
  CHECK(text.find("  gemm                     0.5000            -        -\n") !=
        std::string::npos);
  CHECK(text.find("nccl all_reduce            0.2500       0.3000   +20.0%\n") !=
        std::string::npos);
  CHECK(text.find("nccl reduce_scatter        0.0000       0.1000        -\n") !=
        std::string::npos);
  CHECK(text.find("  bf16 1024x1024x1024 batch 1: 2.1 us, 1000.0 TFLOP/s model ") !=
        std::string::npos);
  CHECK(text.find("# host: 12.00 µs per kernel launched (median of 99 launch-to-launch gaps; a "
                  "launch call takes 3.00 µs)\n") != std::string::npos);

  const auto j = kineto_json(c);
  CHECK(j["trace"] == "t.json");
  CHECK(j["simulated"]["topology"] == "c");
  CHECK(j["simulated"]["mesh"]["dp"] == 8);
  REQUIRE(j["parts"].size() == 8);
  CHECK(j["parts"][6]["error"].get<double>() == doctest::Approx(0.2));
  CHECK_FALSE(j["parts"][7].contains("error"));
  CHECK_FALSE(j["parts"][5].contains("simulated_s"));
  REQUIRE(j["gemm"].size() == 1);
  CHECK(j["gemm"][0]["measured_s"].get<double>() ==
        doctest::Approx(2.0 * 1024 * 1024 * 1024 / 1e15));
  CHECK(j["gemm"][0]["model_s"].get<double>() ==
        kernels.seconds(gemm_kernel({1024, 1024, 1024, 1}, DType::bf16)));
  CHECK(j["host_per_kernel_s"] == 12e-6);

  // Without host launch times: the text says how to get them, and the JSON has no key.
  auto no_host = m;
  no_host.host_per_kernel_s.reset();
  const KinetoComparison c2{"t.json", &no_host, "c", {8, 1, 1, 1, 1, 0}, &r, &kernels};
  CHECK(kineto_text(c2).find("# host: not measured (99 launch-to-launch gaps; profile with "
                             "ProfilerActivity.CPU)\n") != std::string::npos);
  CHECK_FALSE(kineto_json(c2).contains("host_per_kernel_s"));
}
