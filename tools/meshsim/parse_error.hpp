#pragma once
// CLI11's parse errors in meshsim's one-line form, `<flag or command>: <what>` (DESIGN.md's
// command-line contract; issue 19: "The following argument was not expected: --bogus" named no
// command, "Could not convert: --gpus = x" was not in the form).
#include <CLI/CLI.hpp>
#include <string>

namespace meshsim::cli {

// The text after "error: " for a parse error of `app` (the root) on argv.
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

// "meshsim train --topology a.json --workload b.json": the command that ran and the flags it was
// given that name inputs (files, meshes, link changes), for errors raised during a simulation.
std::string inputs_of(const CLI::App& app);

}  // namespace meshsim::cli
