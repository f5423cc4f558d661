#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using meshsim::test::run_cli;
using meshsim::test::topology_path;
using nlohmann::json;

TEST_CASE("collective: DGX H100 all_reduce at 8 GiB, auto (NVLS) and ring") {
  // Published: NVLS ≈ 480 GB/s busbw at 8 GB, ring ≈ 370 GB/s (validation/collectives.md B2, B3).
  auto r = run_cli("collective --topology " + topology_path("dgx-h100.json") +
                   " --op all_reduce --gpus 8 --sizes 8G --json");
  REQUIRE(r.exit_code == 0);
  auto j = json::parse(r.out);
  CHECK(j["op"] == "all_reduce");
  CHECK(j["ranks"] == 8);
  REQUIRE(j["rows"].size() == 1);
  const auto& row = j["rows"][0];
  CHECK(row["bytes"].get<double>() == 8589934592.0);
  CHECK(row["algo"] == "nvls/Simple");
  CHECK(row["busbw_Bps"].get<double>() == doctest::Approx(480e9).epsilon(0.10));
  CHECK(row["algbw_Bps"].get<double>() * 1.75 == doctest::Approx(row["busbw_Bps"].get<double>()));
  CHECK(row["time_s"].get<double>() * row["algbw_Bps"].get<double>() ==
        doctest::Approx(8589934592.0));

  r = run_cli("collective --topology " + topology_path("dgx-h100.json") +
              " --op all_reduce --gpus 8 --sizes 8G --algo ring --json");
  REQUIRE(r.exit_code == 0);
  j = json::parse(r.out);
  CHECK(j["rows"][0]["algo"] == "ring/Simple");
  CHECK(j["rows"][0]["busbw_Bps"].get<double>() == doctest::Approx(370e9).epsilon(0.10));
}

TEST_CASE("collective: default sweep is 8 B to 8 GiB in x2 steps, table like nccl-tests") {
  const auto r = run_cli("collective --topology " + topology_path("dgx-a100.json") +
                         " --op all_gather --group 0-3,6");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("# meshsim collective: all_gather on 5 ranks of dgx-a100") != std::string::npos);
  CHECK(r.out.find("busbw(GB/s)") != std::string::npos);
  std::size_t rows = 0;
  for (std::size_t p = 0; (p = r.out.find("float", p)) != std::string::npos; ++p) ++rows;
  CHECK(rows == 31);  // 2^3 .. 2^33
}

TEST_CASE("collective: multi-node groups and every op run") {
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                         "reduce", "send_recv"}) {
    CAPTURE(op);
    const auto r = run_cli("collective --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 4 --op " + op + " --gpus 32 --sizes 1M:64M --json");
    REQUIRE(r.exit_code == 0);
    const auto j = json::parse(r.out);
    CHECK(j["rows"].size() == 7);
    for (const auto& row : j["rows"]) CHECK(row["time_s"].get<double>() > 0.0);
  }
}

TEST_CASE("collective: bad input is one error line and exit 2") {
  const auto h100 = topology_path("dgx-h100.json");
  const std::pair<std::string, std::string> cases[] = {
      {"--op all_sum --gpus 8", "error: --op: unknown operation 'all_sum'"},
      {"--op all_reduce --gpus 9", "error: --gpus: 9 GPUs asked, the cluster has 8"},
      {"--op all_reduce", "error: --gpus: give --gpus N (N > 0) or --group"},
      {"--op all_reduce --group 0-3,3", "error: --group: '0-3,3': a GPU appears twice"},
      {"--op all_reduce --group 4-2", "error: --group: '4-2': ranges must be ascending"},
      {"--op all_reduce --group 0-8", "error: --group: '0-8': GPU 8 does not exist"},
      {"--op all_reduce --group x", "error: --group: 'x': expected a list like 0-7,16"},
      {"--op all_reduce --gpus 8 --sizes 8X", "error: --sizes: invalid size '8X'"},
      {"--op all_reduce --gpus 8 --sizes 8G:1K", "error: --sizes: '8G:1K': need 0 < first <= last"},
      {"--op all_reduce --gpus 8 --algo magic", "error: --algo: unknown algorithm 'magic'"},
      {"--op all_to_all --gpus 8 --algo ring", "error: --algo: ring cannot run all_to_all here"},
      {"--op send_recv --gpus 1", "error: --gpus: send_recv needs at least 2 ranks"},
  };
  for (const auto& [args, expected] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    CAPTURE(args_);
    const auto r = run_cli("collective --topology " + h100 + " " + args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.starts_with(expected));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  const auto r = run_cli("collective --topology " + topology_path("dgx-a100.json") +
                         " --op all_reduce --gpus 8 --algo nvls");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("NVLS needs NVSwitch and a Hopper-or-later GPU") != std::string::npos);
}
