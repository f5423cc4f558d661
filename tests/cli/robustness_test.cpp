// Numerical robustness: edge-of-range inputs give finite numbers or a clear error, never NaN or
// infinity (nlohmann writes both as null, so a null anywhere in the JSON is a failure) and never
// a crash.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using meshsim::test::run_cli;
using meshsim::test::source_path;
using nlohmann::json;

namespace {

std::string null_path(const json& j, const std::string& path = "") {
  if (j.is_null()) return path.empty() ? "/" : path;
  if (j.is_number_float() && !std::isfinite(j.get<double>())) return path;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      if (auto p = null_path(it.value(), path + "/" + it.key()); !p.empty()) return p;
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i)
      if (auto p = null_path(j[i], path + "/" + std::to_string(i)); !p.empty()) return p;
  return "";
}

const std::string kH100 = source_path("topologies/dgx-h100.json");
const std::string kPod = source_path("topologies/dgx-h100-superpod.json");
const std::string k8b = source_path("workloads/models/llama3.1-8b.json");

}  // namespace

TEST_CASE("robustness: edge-of-range inputs give finite numbers") {
  const std::string cases[] = {
      // zero-byte collectives and one-rank groups
      "collective --topology " + kH100 + " --op all_reduce --gpus 8 --sizes 0",
      "collective --topology " + kH100 + " --op all_gather --gpus 1 --sizes 1M",
      "collective --topology " + kH100 + " --op reduce_scatter --gpus 1 --sizes 0",
      // a link of tiny bandwidth (a NIC at 1e-9 of its rate), folded and full
      "train --topology " + kPod + " --nodes 2 --workload " + k8b +
          " --mesh dp=16 --seq 2048 --gbs 16 --degrade-link n1/nic0:0.000000001",
      "train --topology " + kPod + " --nodes 2 --workload " + k8b +
          " --mesh dp=16 --seq 2048 --gbs 16 --degrade-link n1/nic0:0.000000001 --full",
      // a 1-token sequence
      "train --topology " + kH100 + " --workload " + k8b + " --mesh dp=8 --seq 1 --gbs 8",
      "train --topology " + kH100 + " --workload " + k8b + " --mesh tp=8 --seq 1 --gbs 1",
      "memory --workload " + k8b + " --mesh dp=8 --seq 1",
      "serve --topology " + kH100 + " --workload " + k8b +
          " --mesh tp=1 --rate 1 --requests 5 --prompt fixed:1 --output fixed:1",
      // a 1M-token sequence
      "memory --workload " + k8b + " --mesh tp=8 --seq 1048576",
      "train --topology " + kPod + " --nodes 16 --workload " + k8b +
          " --mesh tp=8,cp=16 --seq 1048576 --gbs 1",
      "serve --topology " + kH100 + " --workload " + k8b +
          " --mesh tp=8 --rate 1 --requests 3 --prompt fixed:1048576 --output fixed:4",
      // every request rejected or finishing at once
      "serve --topology " + kH100 + " --workload " + k8b +
          " --mesh tp=1 --rate inf --requests 50 --prompt fixed:16 --output fixed:2",
  };
  for (const auto& args : cases) {
    INFO(args);
    // Layouts past the GPU's memory (DDP of 8B) are simulated anyway: the numbers are the point.
    const auto with = args + (args.starts_with("train") ? " --allow-oom" : "");
    const auto r = run_cli(with + " --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto j = json::parse(r.out);
    CHECK_MESSAGE(null_path(j).empty(), "null or non-finite at " << null_path(j));
    const auto text = run_cli(with);
    CHECK(text.exit_code == 0);
    for (const char* bad : {" nan", " inf", "-nan", "-inf"})
      CHECK(text.out.find(bad) == std::string::npos);
  }
}

TEST_CASE("robustness: out-of-range sizes are clear errors, not crashes") {
  const std::pair<std::string, std::string> cases[] = {
      {"memory --workload " + k8b + " --mesh dp=8 --seq 0", "--seq"},
      {"train --topology " + kH100 + " --workload " + k8b + " --mesh dp=8 --seq 99999999999999",
       "--seq"},
      {"collective --topology " + kH100 + " --op all_reduce --gpus 8 --sizes 1P", "--sizes"},
      {"serve --topology " + kH100 + " --workload " + k8b + " --mesh tp=1 --rate 1 --requests 0",
       "--requests"},
  };
  for (const auto& [args, flag] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    const auto r = run_cli(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(flag) != std::string::npos);
  }
}

TEST_CASE("scale: a 100,000-GPU cluster loads; past the limit is a clear error") {
  const auto r = run_cli("topo --topology " + source_path("topologies/h100-16k.json") +
                         " --nodes 12500 --json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(json::parse(r.out)["gpus"] == 100000);
  const auto big =
      run_cli("topo --topology " + source_path("topologies/h100-16k.json") + " --nodes 40000");
  CHECK(big.exit_code == 2);
  CHECK(big.err.find("more than the supported 262144") != std::string::npos);
}

TEST_CASE("robustness: output that does not arrive is exit 1 naming where it went") {
  // /dev/full accepts the open and fails every write: a full disk.
  const std::string train =
      "train --topology " + kH100 + " --workload " + k8b + " --mesh tp=8 --seq 2048";
  const std::string serve =
      "serve --topology " + kH100 + " --workload " + k8b + " --mesh tp=8 --rate 1 --requests 20";
  const std::pair<std::string, std::string> cases[] = {
      {train + " > /dev/full", "error: stdout: write failed\n"},
      {train + " --trace /dev/full",
       "error: /dev/full: write failed (disk full or device error)\n"},
      {train + " --report /dev/full",
       "error: /dev/full: write failed (disk full or device error)\n"},
      {serve + " --trace /dev/full",
       "error: /dev/full: write failed (disk full or device error)\n"},
      {serve + " --report /dev/full",
       "error: /dev/full: write failed (disk full or device error)\n"},
      {"topo --topology " + kH100 + " --dot /dev/full",
       "error: /dev/full: write failed (disk full or device error)\n"},
      {"search --topology " + kH100 + " --workload " + k8b +
           " --seq 2048 --gbs 16 --tp 8 --pp 1 --mbs 1 --csv /dev/full",
       "error: /dev/full: write failed (disk full or device error)\n"},
  };
  for (const auto& [args, want] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    const auto r = run_cli(args, meshsim::test::memory_limit_prefix());
    CHECK(r.exit_code == 1);
    CHECK(r.err == want);
  }
  // A path that cannot be opened is bad input: exit 2, naming the flag.
  const auto r = run_cli(train + " --trace /nonexistent-dir/t.json");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: --trace: cannot write '/nonexistent-dir/t.json'\n");
}

TEST_CASE("robustness: inputs that are not regular files, and XML nested past any dump") {
  const auto dir = std::filesystem::temp_directory_path() / "meshsim-robustness-inputs";
  std::filesystem::create_directories(dir);
  const auto fifo = (dir / "fifo").string();
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto deep = (dir / "deep.xml").string();
  {
    std::ofstream f(deep);
    f << "<system version=\"1\">";
    for (int i = 0; i < 100000; ++i) f << "<pci busid=\"0\">";
    for (int i = 0; i < 100000; ++i) f << "</pci>";
    f << "</system>\n";
  }
  const std::string train = "train --topology " + kH100 + " --mesh tp=8 --seq 2048 --workload ";
  const std::pair<std::string, std::string> cases[] = {
      {"topo --topology /dev/zero",
       "error: /dev/zero: is not a regular file (a FIFO, socket or device cannot be an input)\n"},
      {"topo --topology " + fifo,
       "error: " + fifo +
           ": is not a regular file (a FIFO, socket or device cannot be an input)\n"},
      {"topo --topology " + dir.string(),
       "error: " + dir.string() + ": is a directory, not an input file\n"},
      {train + "/dev/zero",
       "error: /dev/zero: is not a regular file (a FIFO, socket or device cannot be an input)\n"},
      {"serve --topology " + kH100 + " --workload " + k8b + " --mesh tp=8 --traffic " + fifo,
       "error: " + fifo +
           ": is not a regular file (a FIFO, socket or device cannot be an input)\n"},
      {"calibrate nccl-topo --xml " + deep + " --out " + (dir / "out.json").string(),
       "error: " + deep +
           ": elements nest 100001 deep; an NCCL topology dump nests about 6 (limit 64)\n"},
  };
  for (const auto& [args, want] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    // A FIFO read would block: the run returning is the test. Under the 2 GiB limit: /dev/zero
    // read until memory runs out would fail this differently.
    const auto r = run_cli(args, meshsim::test::memory_limit_prefix());
    CHECK(r.exit_code == 2);
    CHECK(r.err == want);
  }
  std::filesystem::remove_all(dir);
}
