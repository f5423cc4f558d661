#pragma once
// Runs the built meshsim CLI as a user would and captures exit code, stdout and stderr.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_paths.hpp"

namespace meshsim::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// AddressSanitizer reserves terabytes of shadow memory up front, so an address-space limit
// stops it from starting: under the sanitizers, commands run without one. The tests' own code is
// not instrumented (cmake/sanitizers.cmake), so the build says so: MESHSIM_SANITIZED.
#if defined(MESHSIM_SANITIZED)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// A shell prefix that limits a command to 2 GiB of address space (issue 19's RSS bound, as
// RLIMIT_AS), or nothing under the sanitizers.
inline std::string memory_limit_prefix() {
  return kSanitized ? "" : "ulimit -v 2097152; ";
}

// No command of the test suite takes a minute in release; a hang is killed here and fails its
// test (exit 124 from coreutils timeout) instead of costing the whole CI run. The sanitizer build
// is ~20× slower, hence the margin.
inline constexpr int kCliTimeoutSeconds = 900;

// `shell_prefix` runs before the command in the same shell ("ulimit -v 2097152; ").
inline CliResult run_cli(const std::string& args, const std::string& shell_prefix = "") {
  static int counter = 0;
  const auto err_file =
      std::filesystem::temp_directory_path() /
      ("meshsim_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".txt");
  const std::string cmd = shell_prefix + "timeout -k 10 " + std::to_string(kCliTimeoutSeconds) +
                          " " + std::string(cli_path()) + " " + args + " 2>" + err_file.string();
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream ef(err_file);
  std::stringstream ss;
  ss << ef.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_file);
  return r;
}

// A command that must succeed, its stdout parsed as JSON (args end with --json).
inline nlohmann::json run_cli_json(const std::string& args) {
  const auto r = run_cli(args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace meshsim::test
