#pragma once
// Subcommands of the meshsim CLI. Each registers its flags on the app and returns the function
// that runs it once the arguments have been parsed. The CLI stays thin: parse, call the library,
// print.
#include <CLI/CLI.hpp>
#include <functional>

namespace meshsim::cli {

using Runner = std::function<int()>;

Runner add_topo_command(CLI::App& app);
Runner add_collective_command(CLI::App& app);

}  // namespace meshsim::cli
