// Golden outputs: the JSON of one fixed run per command (tests/golden/*.json), compared with a
// relative tolerance of 1e-6 on numbers. A failure here means a prediction changed, which is a
// different question from whether it is accurate (meshsim validate). After an intended change:
//   MESHSIM_UPDATE_GOLDEN=1 build/release/tests/test_cli -tc="golden*"
// rewrites them; review the diff and commit it with the change.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "json_near.hpp"

using meshsim::test::run_cli;
using meshsim::test::source_path;
using nlohmann::json;

namespace {

struct GoldenRun {
  const char* name;
  std::string args;      // the command line after `meshsim`
  std::string out_file;  // when the JSON is written to a file rather than stdout
};

std::string topo(const char* f) {
  return source_path(std::string("topologies/") + f);
}
std::string model(const char* f) {
  return source_path(std::string("workloads/models/") + f);
}

std::vector<GoldenRun> runs() {
  const auto tmp = std::filesystem::temp_directory_path().string();
  return {
      {"topo", "topo --topology " + topo("dgx-h100-superpod.json") + " --nodes 4 --json", ""},
      {"collective",
       "collective --topology " + topo("dgx-h100.json") +
           " --op all_reduce --gpus 8 --sizes 1M:1G --json",
       ""},
      {"memory",
       "memory --workload " + model("llama3.1-70b.json") +
           " --mesh tp=8,pp=4,dp=2 --zero 1 --seq 8192 --gbs 64 --json",
       ""},
      {"train",
       "train --topology " + topo("dgx-h100-superpod.json") + " --nodes 2 --workload " +
           model("llama3.1-8b.json") + " --mesh tp=2,pp=2,dp=4 --seq 4096 --gbs 32 --json",
       ""},
      {"search",
       "search --topology " + topo("dgx-h100.json") + " --workload " + model("llama3.1-8b.json") +
           " --seq 4096 --gbs 16 --tp 2 --zero 1 --top 3 --json",
       ""},
      {"serve",
       "serve --topology " + topo("dgx-h100.json") + " --workload " + model("llama3.1-8b.json") +
           " --mesh tp=2 --replicas 2 --rate 6 --requests 400 --prompt lognormal:1024,0.8 "
           "--output lognormal:256,0.7 --json",
       ""},
      {"calibrate-fit",
       "calibrate fit --raw " + source_path("tools/calibrate/examples/h100-raw-example.json") +
           " --out " + tmp + "/meshsim_golden_profile.json",
       tmp + "/meshsim_golden_profile.json"},
      {"validate", "validate --cases " + source_path("validation") + " --only seed --json", ""},
      {"ops",
       "ops --workload " + model("llama3.1-70b.json") +
           " --gpu H100-SXM5-80GB --tokens 2048 --tp 8 --context 2048 --json",
       ""},
  };
}

// Paths that name the machine (the profile's source mentions the input's absolute path).
void scrub(json& j) {
  if (j.is_object() && j.contains("source") && j["source"].is_string()) j["source"] = "<scrubbed>";
}

}  // namespace

TEST_CASE("golden outputs: one fixed run per command") {
  const bool update = std::getenv("MESHSIM_UPDATE_GOLDEN") != nullptr;
  for (const auto& g : runs()) {
    INFO(g.name);
    const auto r = run_cli(g.args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    json got;
    if (g.out_file.empty()) {
      got = json::parse(r.out);
    } else {
      std::ifstream f(g.out_file);
      got = json::parse(f);
    }
    scrub(got);
    const auto file = source_path(std::string("tests/golden/") + g.name + ".json");
    if (update) {
      std::ofstream(file) << got.dump(1) << "\n";
      continue;
    }
    std::ifstream f(file);
    REQUIRE_MESSAGE(f.good(), "missing " << file << " (regenerate with MESHSIM_UPDATE_GOLDEN=1)");
    const auto want = json::parse(f);
    const auto diff = meshsim::test::json_diff(got, want, 1e-6);
    CHECK_MESSAGE(diff.empty(), g.name << " changed at " << diff);
  }
}

TEST_CASE("determinism: every command twice gives identical bytes") {
  for (const auto& g : runs()) {
    INFO(g.name);
    const auto read_out = [&](const meshsim::test::CliResult& r) {
      if (g.out_file.empty()) return r.out;
      std::ifstream f(g.out_file);
      return std::string(std::istreambuf_iterator<char>(f), {});
    };
    const auto a = run_cli(g.args);
    const auto first = read_out(a);
    const auto b = run_cli(g.args);
    CHECK(a.exit_code == 0);
    CHECK(first == read_out(b));
  }
  // Text output too, for the commands whose text carries the most numbers.
  for (const auto& args :
       {std::string("serve --topology ") + topo("dgx-h100.json") + " --workload " +
            model("llama3.1-8b.json") + " --mesh tp=4 --disaggregate 1:1 --rate 3 --requests 200",
        std::string("train --topology ") + topo("dgx-h100.json") + " --workload " +
            model("llama3.1-8b.json") + " --mesh tp=2,pp=2,dp=2 --seq 2048 --gbs 16"}) {
    INFO(args);
    CHECK(run_cli(args).out == run_cli(args).out);
  }
}
