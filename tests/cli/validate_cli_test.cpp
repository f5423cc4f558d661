#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

using meshsim::test::run_cli;
using meshsim::test::source_path;
using nlohmann::json;

namespace {
std::string fmt_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100 * fraction);
  return buf;
}
}  // namespace

TEST_CASE("validate: the seed checks hold to the seed's rounding") {
  const auto r = run_cli("validate --cases " + source_path("validation") + " --only seed --json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto j = json::parse(r.out);
  REQUIRE(j["cases"].size() == 7);
  for (const auto& c : j["cases"]) {
    INFO(c["name"].get<std::string>());
    CHECK(c["within_tolerance"] == true);
  }
  CHECK(j["mape"]["seed-checks"].get<double>() < 0.01);
}

TEST_CASE("validate: bad input") {
  const auto missing = run_cli("validate --cases /nonexistent");
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("--cases") != std::string::npos);
  const auto none = run_cli("validate --cases " + source_path("validation") + " --only zzz-none");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("--only") != std::string::npos);
}

// Every case (about 15 s): per-group ceilings, so an accuracy regression fails CI, and the
// README's table must be the command's output.
TEST_CASE("validate: every case, per-group ceilings, the README table") {
  const auto r = run_cli("validate --cases " + source_path("validation") + " --json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto j = json::parse(r.out);
  const std::map<std::string, double> ceiling = {{"collectives", 0.15},
                                                 {"megatron-sc21-a100", 0.20},
                                                 {"megatron-core-h100", 0.15},
                                                 // saturated server case: serving_accuracy_test
                                                 {"mlperf-inference-v4.1", 18.0},
                                                 {"seed-checks", 0.01},
                                                 {"stack-deltas", 0.10}};
  std::map<std::string, int> counts;
  for (const auto& c : j["cases"]) {
    ++counts[c["group"].get<std::string>()];
    CHECK(std::isfinite(c["simulated"].get<double>()));
  }
  for (const auto& [group, max] : ceiling) {
    const auto& group_ = group;  // clang 14 cannot capture a structured binding
    INFO(group_);
    REQUIRE(j["mape"].contains(group));
    CHECK(j["mape"][group].get<double>() <= max);
  }
  std::ifstream f(source_path("README.md"));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string readme = ss.str();
  for (const auto& [group, value] : j["mape"].items()) {
    const auto row = "| " + group + " | " + std::to_string(counts[group]) + " | " +
                     fmt_percent(value.get<double>()) + " |";
    INFO(row);
    CHECK(readme.find(row) != std::string::npos);
  }
}

TEST_CASE("validate: a stack-delta case names the file and the field it cannot read") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("meshsim-validate-" + std::to_string(::getpid())) / "validation";
  std::filesystem::create_directories(dir);
  std::ifstream in(source_path("validation/stack_deltas.json"));
  auto doc = json::parse(in);
  auto run_with = [&](const std::string& file_text) {
    std::ofstream(dir / "stack_deltas.json") << file_text;
    return run_cli("validate --cases " + dir.string() + " --quiet");
  };
  auto unknown_stack = doc;
  unknown_stack["cases"][1]["variant"]["stack"] = "titan";
  const auto a = run_with(unknown_stack.dump());
  CHECK(a.exit_code == 2);
  CHECK(a.err.find("stack_deltas.json:/cases/1/variant/stack: no bundled stack 'titan'") !=
        std::string::npos);
  auto no_base = doc;
  no_base["cases"][0].erase("base");
  const auto b = run_with(no_base.dump());
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("stack_deltas.json:/cases/0: missing required field 'base'") !=
        std::string::npos);
  auto bad_metric = doc;
  bad_metric["cases"][2]["metric"] = "achieved_tflops_per_gpu";
  const auto c = run_with(bad_metric.dump());
  CHECK(c.exit_code == 2);
  CHECK(c.err.find("/cases/2/metric: expected speedup") != std::string::npos);
  auto bad_dtype = doc;
  bad_dtype["cases"][4]["variant"]["dtype"] = "fp4";
  const auto d = run_with(bad_dtype.dump());
  CHECK(d.exit_code == 2);
  CHECK(d.err.find("stack_deltas.json:/cases/4/variant/dtype: unknown dtype 'fp4'") !=
        std::string::npos);
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("validate: progress per case file on stderr, none with --quiet") {
  const std::string args = "validate --cases " + source_path("validation") + " --only seed";
  const auto loud = run_cli(args);
  REQUIRE_MESSAGE(loud.exit_code == 0, loud.err);
  CHECK(loud.err.find("# validate: seed_checks.json done, ") != std::string::npos);
  const auto quiet = run_cli(args + " --quiet");
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  CHECK(quiet.out == loud.out);  // stdout does not change
}

TEST_CASE("validate: a collectives case the cluster cannot hold exits 2 with the file and field") {
  // Case files name clusters relative to the repository the folder is in: a temporary one with
  // the bundled clusters linked in. 4,096 GPUs of an 8-GPU node once crashed the reader.
  const auto repo = std::filesystem::temp_directory_path() /
                    ("meshsim-validate-gpus-" + std::to_string(::getpid()));
  const auto dir = repo / "validation";
  std::filesystem::create_directories(dir);
  std::filesystem::create_directory_symlink(source_path("topologies"), repo / "topologies");
  std::ifstream in(source_path("validation/collectives.json"));
  auto doc = json::parse(in);
  doc["cases"] = json::array({doc["cases"][0]});
  doc["cases"][0]["gpus"] = 4096;
  std::ofstream(dir / "collectives.json") << doc.dump();
  const auto r = run_cli("validate --cases " + dir.string() + " --quiet");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "collectives.json").string() +
                     ":/cases/0/gpus: 4096 GPUs asked, the cluster has 8\n");
  std::filesystem::remove_all(repo);
}
