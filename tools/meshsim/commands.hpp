#pragma once
// Subcommands of the meshsim CLI. Each registers its flags on the app and returns the function
// that runs it once the arguments have been parsed. The CLI stays thin: parse, call the library,
// print.
#include <CLI/CLI.hpp>
#include <functional>

#include "core/error.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim::cli {

using Runner = std::function<int()>;

// `--nodes N` as loader options: 0 means "as the file says".
inline TopologyOptions topology_options(std::int32_t nodes) {
  TopologyOptions opt;
  if (nodes < 0) throw Error("", "--nodes", "must be a positive integer");
  if (nodes > 0) opt.nodes = nodes;
  return opt;
}

Runner add_topo_command(CLI::App& app);
Runner add_collective_command(CLI::App& app);

}  // namespace meshsim::cli
