// The README as a test (ctest test_readme.0 and .1, label readme): every command of every ```sh
// block runs as written, from a scratch folder that sees the checkout's topologies/, workloads/,
// validation/ and tools/ (so the files the commands write land there), with `meshsim` the built
// CLI under a time cap per command. Commands that are not meshsim's are checked against the list
// below (they build or install, or need a GPU), so a new kind of example cannot go untested.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_paths.hpp"

namespace fs = std::filesystem;

namespace {

// Each README command may take this long (a search of the 512-GPU SuperPOD takes ~20 s on two
// cores; the sweep over four cluster sizes the longest).
constexpr int kCommandSeconds = 300;

// Lines that are not run here, by their first word: the build and test entry points themselves
// (this test runs inside `tools/dev test`), CMake, and the CUDA harness (a GPU node).
const char* const kNotRun[] = {"tools/dev ", "cmake ", "build/release/tools/calibrate/"};

struct Block {
  int line = 0;                       // of the opening ```sh
  std::vector<std::string> commands;  // continuation lines joined
};

std::vector<Block> sh_blocks(const std::string& readme) {
  std::vector<Block> blocks;
  std::istringstream in(readme);
  std::string line, pending;
  bool inside = false;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!inside && line.rfind("```sh", 0) == 0) {
      inside = true;
      blocks.push_back({number, {}});
      continue;
    }
    if (inside && line.rfind("```", 0) == 0) {
      inside = false;
      continue;
    }
    if (!inside) continue;
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1);
      continue;
    }
    pending += line;
    const auto first = pending.find_first_not_of(' ');
    if (first != std::string::npos && pending[first] != '#')
      blocks.back().commands.push_back(pending.substr(first));
    pending.clear();
  }
  return blocks;
}

bool not_run(const std::string& command) {
  for (const char* prefix : kNotRun)
    if (command.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string run_shell(const std::string& script_path, int& status) {
  const std::string cmd = "bash " + script_path + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  std::size_t n;
  while (p && (n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  status = p ? ::pclose(p) : -1;
  return out;
}

// MESHSIM_README_SHARD=K/N: only blocks K, K + N, K + 2N, ... (ctest runs the README as N
// entries beside each other: as one it was the longest entry of the release tests, 128 s).
std::pair<std::size_t, std::size_t> shard() {
  const char* s = std::getenv("MESHSIM_README_SHARD");
  if (!s) return {0, 1};
  std::size_t k = 0, n = 0;
  char slash = 0;
  std::istringstream in(s);
  in >> k >> slash >> n;
  REQUIRE_MESSAGE((in && slash == '/' && n > 0 && k < n), "MESHSIM_README_SHARD=" << s);
  return {k, n};
}

}  // namespace

TEST_CASE("readme: every command in the README's sh blocks runs as written") {
  std::ifstream f(meshsim::test::source_path("README.md"));
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  const auto blocks = sh_blocks(ss.str());
  REQUIRE(blocks.size() >= 8);

  const auto dir = fs::temp_directory_path() / ("meshsim_readme_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* sub : {"topologies", "workloads", "validation", "tools"})
    fs::create_directory_symlink(meshsim::test::source_path(sub), dir / sub);
  const auto bin = fs::path(meshsim::test::cli_path()).parent_path().string();

  const auto [shard_k, shard_n] = shard();
  int run = 0;
  for (std::size_t b = shard_k; b < blocks.size(); b += shard_n) {
    const auto& block = blocks[b];
    // One script per block: its commands share the variables it sets (V="meshsim serve ...").
    std::string script = "set -euo pipefail\ncd '" + dir.string() + "'\nexport PATH='" + bin +
                         "':\"$PATH\"\n" +
                         // As root, OpenMPI wants to be told (the README says so).
                         "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n" +
                         "meshsim() { timeout -k 10 " + std::to_string(kCommandSeconds) + " '" +
                         meshsim::test::cli_path() + "' \"$@\"; }\n";
    for (const auto& c : block.commands) {
      if (not_run(c)) continue;
      const bool ours = c.rfind("meshsim ", 0) == 0 || c.rfind("mpirun ", 0) == 0 ||
                        c.rfind("$", 0) == 0 || c.find("=\"meshsim ") != std::string::npos;
      INFO("README.md block at line " << block.line << ": " << c);
      CHECK_MESSAGE(ours, "a README command that is neither meshsim's nor in kNotRun");
      if (!ours) continue;
      // mpirun runs the binary on PATH; give it the same cap.
      script +=
          (c.rfind("mpirun ", 0) == 0 ? "timeout -k 10 " + std::to_string(kCommandSeconds) + " " + c
                                      : c) +
          " > /dev/null\n";
      ++run;
    }
    const auto path = dir / ("block-" + std::to_string(block.line) + ".sh");
    std::ofstream(path) << script;
    int status = 0;
    const auto out = run_shell(path.string(), status);
    INFO("README.md block at line " << block.line << ":\n" << script << "\noutput:\n" << out);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(run >= 30 / static_cast<int>(shard_n));
  fs::remove_all(dir);
}
