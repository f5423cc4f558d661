// Vidur's measured NCCL kernel times against meshsim's collective price
// (network/measured_collectives.hpp). The accuracy case prices every row of
// validation/collectives/vidur-nccl.json and writes validation/collectives-vidur.md; its ceilings
// are today's figures with a little headroom, so a regression fails (they are not targets).
#include "network/measured_collectives.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.hpp"
#include "core/median.hpp"
#include "core/rng.hpp"
#include "json_mutation.hpp"
#include "network/collective_runner.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const auto p = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(p) << text;
  return p;
}

std::string row(const std::string& fields) {
  return R"({"system":"h100_dgx","op":"all_reduce","topology":"dgx-h100.json","nodes":1,)" +
         fields + "}";
}

std::string file_of(const std::string& rows) {
  return R"({"notes":["test"],"rows":[)" + rows + "]}";
}

}  // namespace

TEST_CASE("measured collectives: each row priced as meshsim collective prices it") {
  const auto path = write(
      "ms_vn1.json",
      file_of(row(R"("ranks":[0,1,2,3],"bytes":16777216,"measured_us":100,"std_us":1)") + "," +
              R"({"system":"h100_dgx","op":"send_recv","topology":"dgx-h100-superpod.json",)"
              R"("nodes":2,"ranks":[0,8],"bytes":1048576,"measured_us":50,"std_us":0})"));
  const auto rows = price_measured_collectives(path, test::source_path(""));
  REQUIRE(rows.size() == 2);
  const Topology one = load_topology(test::topology_path("dgx-h100.json"));
  Router router(one);
  const auto direct =
      price_collective(one, router, {CollectiveOp::all_reduce, {0, 1, 2, 3}, 16777216.0}, {});
  CHECK(rows[0].predicted_s == direct.time.seconds());
  CHECK(rows[0].measured_s == doctest::Approx(100e-6));
  CHECK(rows[0].error() == doctest::Approx(direct.time.seconds() / 100e-6 - 1));
  CHECK(rows[0].chosen ==
        std::string(name_of(direct.algo)) + "/" + std::string(name_of(direct.protocol)));
  CHECK(rows[0].layout() == "4 GPUs, 1 node");
  TopologyOptions two_nodes;
  two_nodes.nodes = 2;
  const Topology pod = load_topology(test::topology_path("dgx-h100-superpod.json"), two_nodes);
  Router pod_router(pod);
  CHECK(rows[1].predicted_s ==
        price_collective(pod, pod_router, {CollectiveOp::send_recv, {0, 8}, 1048576.0}, {})
            .time.seconds());
  CHECK(rows[1].layout() == "2 GPUs, 2 nodes");
}

TEST_CASE("measured collectives: size bands and the table, by hand") {
  CHECK(collective_size_band(1048575) == "< 1 MiB");
  CHECK(collective_size_band(1048576) == "1–16 MiB");
  CHECK(collective_size_band(16.0 * 1048576) == "16–64 MiB");
  CHECK(collective_size_band(64.0 * 1048576) == "≥ 64 MiB");
  // Three 8-GPU all-reduces of 2 MiB measured 100 µs, priced 80, 90 and 130 µs: errors −20 %,
  // −10 %, +30 %; signed median −10 %, |error| median 20 %, p95 20 + 0.9 · 10 = 29 %, max 30 %.
  std::vector<MeasuredCollective> rows;
  for (double us : {80.0, 90.0, 130.0}) {
    MeasuredCollective m;
    m.system = "h100_dgx";
    m.ranks = {0, 1, 2, 3, 4, 5, 6, 7};
    m.bytes = 2 * 1048576.0;
    m.measured_s = 100e-6;
    m.predicted_s = us * 1e-6;
    m.chosen = us > 100 ? "ring/LL128" : "ring/LL";
    rows.push_back(m);
  }
  CHECK(measured_collectives_markdown(rows, "# T\n") ==
        "# T\n\n| node type | collective | layout | size | count | signed median % | median "
        "\\|error\\| % | p95 % | max % | priced as |\n"
        "|---|---|---|---|---:|---:|---:|---:|---:|---|\n"
        "| h100_dgx | all_reduce | 8 GPUs, 1 node | 1–16 MiB | 3 | -10.0 | 20.0 | 29.0 | 30.0 | "
        "ring/LL ×2, ring/LL128 ×1 |\n");
}

TEST_CASE("measured collectives: a file that cannot be priced says where") {
  const std::string good = R"("bytes":8,"measured_us":1,"std_us":0)";
  const struct {
    std::string text, message;
  } cases[] = {
      {file_of(R"({"system":"h100_dgx","op":"all_to_any","topology":"dgx-h100.json",)"
               R"("nodes":1,"ranks":[0,1],)" +
               good + "}"),
       "/rows/0/op: unknown collective 'all_to_any'"},
      {file_of(row(R"("ranks":[0,8],)" + good)), "/rows/0/ranks/1"},
      {file_of(row(R"("ranks":[1,1],)" + good)), "/rows/0/ranks/1: GPU 1 appears twice"},
      {file_of(row(R"("ranks":[0],)" + good)),
       "/rows/0/ranks: a collective needs at least two ranks"},
      {file_of(row(R"("ranks":[0,1],"bytes":8,"measured_us":0,"std_us":0)")),
       "/rows/0/measured_us"},
      {file_of(row(R"("ranks":[0,1],"extra":1,)" + good)), "/rows/0/extra"},
      {file_of(R"({"system":"h100_dgx","op":"all_reduce","topology":"../topologies/dgx-h100.json",)"
               R"("nodes":1,"ranks":[0,1],)" +
               good + "}"),
       "/rows/0/topology: '../topologies/dgx-h100.json' must be a bare file name, without a "
       "folder"},
      {R"({"notes":[],"rows":[]})", "/rows"},
  };
  int n = 0;
  for (const auto& c : cases) {
    const auto path = write("ms_vn_bad" + std::to_string(n++) + ".json", c.text);
    CAPTURE(c.text);
    CHECK_THROWS_WITH_AS(price_measured_collectives(path, test::source_path("")),
                         doctest::Contains((path + ":" + c.message).c_str()), Error);
  }
}

TEST_CASE("measured collectives: mutants of the converted file price or fail cleanly") {
  // Two rows of each node type, op and node count from the real file, then one to three
  // mutations (tests/json_mutation.hpp; every other mutant keeps its JSON types): each mutant
  // prices or throws one Error line.
  const Json original = load_json_file(test::source_path("validation/collectives/vidur-nccl.json"));
  Json base = {{"notes", original["notes"]}, {"rows", Json::array()}};
  std::map<std::string, int> taken;
  for (const auto& r : original["rows"]) {
    const auto key = r["system"].get<std::string>() + r["op"].get<std::string>() +
                     std::to_string(r["nodes"].get<int>());
    if (taken[key]++ < 2) base["rows"].push_back(r);
  }
  REQUIRE(base["rows"].size() == 14);
  const auto outcome = test::run_mutants(
      base, 300, 11, write("ms_vn_mutant.json", ""),
      [](const std::string& path) {
        for (const auto& r : price_measured_collectives(path, test::source_path("")))
          CHECK(r.predicted_s > 0);
      },
      Json::json_pointer(""), /*typed=*/true);
  CHECK(outcome.errors > 20);
  CHECK(outcome.multi_line_errors == 0);
}

TEST_CASE("measured collectives accuracy: Vidur's NCCL sweeps on DGX H100 and A100") {
  const auto rows = price_measured_collectives(
      test::source_path("validation/collectives/vidur-nccl.json"), test::source_path(""));
  CHECK(rows.size() == 1232);
  // Regression ceilings on the signed median error from 1 MiB up, today's figures with headroom
  // (the model is fast on A100 NVLink at these sizes and on every cross-node A100 row; see the
  // preamble below). `within` holds the within-node H100 rings where the model is close.
  std::vector<double> within, a100_node;
  for (const auto& r : rows) {
    if (r.bytes < 1048576) continue;
    if (r.system == "h100_dgx" && r.nodes == 1 && r.op == CollectiveOp::all_reduce &&
        r.ranks.size() >= 4)
      within.push_back(r.error());
    if (r.system == "a100_dgx" && r.nodes == 1 && r.op == CollectiveOp::all_reduce)
      a100_node.push_back(r.error());
  }
  CHECK(std::abs(median_of(within)) < 0.08);
  CHECK(median_of(a100_node) > -0.40);
  // The preamble's figures, read off the rows: the cross-node send/recv rates at the largest size.
  const auto largest_pair = [&](const std::string& system) {
    const MeasuredCollective* best = nullptr;
    for (const auto& r : rows)
      if (r.system == system && r.op == CollectiveOp::send_recv && r.nodes == 2 &&
          (!best || r.bytes > best->bytes))
        best = &r;
    REQUIRE(best != nullptr);
    return *best;
  };
  const auto a100 = largest_pair("a100_dgx"), h100 = largest_pair("h100_dgx");
  const auto gbps = [](double bytes, double s) { return bytes / s / 1e9; };
  const std::string cross_node = fmt::format(
      "- Vidur does not describe its clusters' inter-node network. Its A100 cluster moves {:.1f} "
      "GB/s between two nodes (send/recv at {:.0f} MiB, about {:.0f} Gb/s), far below a DGX "
      "SuperPOD's 200 Gb/s per GPU, so the cross-node A100 rows compare with another network "
      "than the one priced and are not a check of the model either. The H100 pair across nodes "
      "moves {:.1f} GB/s at {:.0f} MiB, against the model's {:.0f} GB/s on a 400 Gb/s NIC.\n",
      gbps(a100.bytes, a100.measured_s), a100.bytes / 1048576,
      8 * gbps(a100.bytes, a100.measured_s), gbps(h100.bytes, h100.measured_s),
      h100.bytes / 1048576, gbps(h100.bytes, h100.predicted_s));
  const std::string within_node =
      "- Within a node the sizes stop at 64 MiB. On A100 all-reduce the model is faster than "
      "measured at every size from 1 MiB (the signed medians below), as against Azure's "
      "nccl-tests sweep (collectives.md, the rows marked known gap): meshsim reaches its NVLink "
      "plateau at smaller sizes than NCCL does on A100 (NCCL's channel and chunk ramp is not "
      "modelled). On two H100 GPUs the model is also fast from 16 MiB up (not investigated).\n";
  const std::string preamble =
      "# Collectives against Vidur's measured NCCL kernels\n\n"
      "Generated by `build/release/tests/test_network -tc=\"measured collectives accuracy*\"` "
      "(ctest label `accuracy`); do not edit.\n\n"
      "Vidur's published NCCL all-reduce and send/recv kernel times on DGX H100 and DGX A100 "
      "nodes (`validation/collectives/vidur-nccl.json`, converted from `../shared/measurements/` "
      "by `tools/convert_vidur.py`; MIT licence, provenance in that folder's README), each priced "
      "as `meshsim collective` prices the same collective, GPUs and size on the bundled cluster "
      "file (one node: `dgx-h100.json`, `dgx-a100.json`; two: the SuperPOD file rebuilt with two "
      "nodes), with NCCL's algorithm and protocol choice. Nothing is fitted to these rows. Error "
      "= (predicted − measured) / measured of the kernel time; negative: meshsim is faster.\n\n"
      "How to read it:\n"
      "- Below 1 MiB the measurements bound latency from above rather than measure it: the timed "
      "kernel also waits for the slowest rank after the barrier (30–60 µs even at 2 KiB on 4–8 "
      "GPUs, per the measurements' README), so those rows are not a check of the model.\n" +
      cross_node + within_node;
  std::ofstream(test::source_path("validation/collectives-vidur.md"))
      << measured_collectives_markdown(rows, preamble);
}

}  // namespace meshsim
