#pragma once
// Subcommands of the meshsim CLI. Each registers its flags on the app and returns the function
// that runs it once the arguments have been parsed. The CLI stays thin: parse, call the library,
// print.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <functional>

#include "core/error.hpp"
#include "embedding.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim::cli {

using Runner = std::function<int()>;

// The command line as typed (for reports: "the exact command that produced it"), per thread.
void set_command_line(int argc, char** argv);
const std::string& command_line();

// Parses `argc`/`argv` (argv[0] is the program) and runs the command, printing to this
// thread's cli_out() and cli_err() (embedding.hpp); returns the exit code (DESIGN.md: 0; 2 bad
// input with one `error:` line; 1 internal failure; 3 `train`'s "does not fit"). The whole CLI
// behind main().
int run_command(int argc, char** argv);

// The JSON document a command prints, checked first: a NaN or infinity would print as `null`, so
// one is an exit-2 error naming its JSON path (and, from main, the command's inputs), never
// output.
std::string json_text(const Json& j);

// A count flag that, when given, must be a positive integer ("--nodes 0" is an error, not the
// file's default).
inline CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= 1) return "";
        } catch (const std::exception&) {
        }
        return "'" + v + "': must be a positive integer";
      },
      "POSITIVE");
}

// A number flag that, when given, must lie in [lo, hi] (finite; no silent default).
inline CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const double x = std::stod(v, &used);
          if (used == v.size() && x >= lo && x <= hi) return "";
        } catch (const std::exception&) {
        }
        return fmt::format("'{}': must be a number from {:g} to {:g}", v, lo, hi);
      },
      "NUMBER");
}

// The flags every cluster command shares: --topology, --nodes and --json.
struct ClusterArgs {
  std::string topology;
  std::int32_t nodes = 0;  // 0: as the file says
  bool json = false;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--topology", topology, "Cluster file (topologies/*.json)")->required();
    cmd->add_option("--nodes", nodes, "Rebuild a parametric cluster with N nodes")
        ->check(positive_count());
    cmd->add_flag("--json", json, "Print one JSON document");
  }
  Topology load() const {
    TopologyOptions opt;
    if (nodes < 0) throw Error("", "--nodes", "must be a positive integer");
    if (nodes > 0) opt.nodes = nodes;
    return load_topology(topology, opt);
  }
};

Runner add_topo_command(CLI::App& app);
Runner add_collective_command(CLI::App& app);
Runner add_memory_command(CLI::App& app);
Runner add_ops_command(CLI::App& app);
Runner add_train_command(CLI::App& app);
Runner add_search_command(CLI::App& app);
Runner add_serve_command(CLI::App& app);
Runner add_calibrate_command(CLI::App& app);
Runner add_validate_command(CLI::App& app);

}  // namespace meshsim::cli
