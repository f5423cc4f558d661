// The CLI behind main() and the Python module: the app, its commands and the one error boundary.
// Exit codes (DESIGN.md): 0 success, 2 bad input (one `error:` line), 1 internal failure;
// `train` exits 3 when the layout does not fit memory (a verdict, not an error).
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <new>

#include "commands.hpp"
#include "core/error.hpp"
#include "parse_error.hpp"

namespace meshsim::cli {
namespace {
std::string& stored_command_line() {
  thread_local std::string line;
  return line;
}
}  // namespace
void set_command_line(int argc, char** argv) {
  auto& line = stored_command_line();
  line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) line += ' ';
    line += i == 0 ? std::string("meshsim") : std::string(argv[i]);
  }
}
const std::string& command_line() {
  return stored_command_line();
}
}  // namespace meshsim::cli

int meshsim::cli::run_command(int argc, char** argv) {
  meshsim::cli::set_command_line(argc, argv);
  CLI::App app{"meshsim: discrete-event cluster simulator for parallel LLM training and serving"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "meshsim " MESHSIM_VERSION);
  std::map<const CLI::App*, meshsim::cli::Runner> runners;
  auto add = [&](meshsim::cli::Runner (*make)(CLI::App&)) {
    const auto before = app.get_subcommands({}).size();
    auto runner = make(app);
    runners[app.get_subcommands({})[before]] = std::move(runner);
  };
  add(meshsim::cli::add_topo_command);
  add(meshsim::cli::add_collective_command);
  add(meshsim::cli::add_memory_command);
  add(meshsim::cli::add_ops_command);
  add(meshsim::cli::add_train_command);
  add(meshsim::cli::add_search_command);
  add(meshsim::cli::add_serve_command);
  add(meshsim::cli::add_calibrate_command);
  add(meshsim::cli::add_validate_command);

  // --help shows an option's default where it has one; a value that means "not given: the
  // file's, the engine's or none" (empty, 0, -1) is left out rather than shown as if it were used.
  std::function<void(CLI::App*)> show_defaults = [&](CLI::App* a) {
    for (auto* o : a->get_options()) {
      if (o->get_type_size_min() == 0 || !o->get_default_str().empty()) continue;  // flags
      o->capture_default_str();
      const auto d = o->get_default_str();
      if (d == "0" || d == "-1" || d == "[]" || d == "{}") o->default_str("");
    }
    for (auto* sub : a->get_subcommands([](CLI::App*) { return true; })) show_defaults(sub);
  };
  show_defaults(&app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, meshsim::cli::cli_out(), meshsim::cli::cli_err());
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, meshsim::cli::cli_out(), meshsim::cli::cli_err());
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, meshsim::cli::cli_out(), meshsim::cli::cli_err());
  } catch (const CLI::ParseError& e) {
    meshsim::cli::cli_err() << "error: " << meshsim::cli::parse_error_line(app, e, argc, argv)
                            << "\n";
    return 2;
  }
  // One error boundary: bad input exits 2; output that did not arrive, memory exhaustion and
  // anything else exit 1 with one line (workers' exceptions reach here: search/worker_pool.hpp).
  int code = 2;
  try {
    for (const auto* sub : app.get_subcommands())
      if (auto it = runners.find(sub); it != runners.end()) code = it->second();
  } catch (const meshsim::Error& e) {
    // An error raised while simulating (the simulated time passing 2^63 ps) has no file or flag
    // of its own: it names the command and the input flags it ran with.
    if (e.where().empty() && e.path().empty())
      meshsim::cli::cli_err() << "error: " << meshsim::cli::inputs_of(app) << ": " << e.what()
                              << "\n";
    else
      meshsim::cli::cli_err() << "error: " << e.what() << "\n";
    return 2;
  } catch (const meshsim::WriteError& e) {
    meshsim::cli::cli_err() << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    meshsim::cli::cli_err()
        << "internal error: out of memory (the input needs more than this machine has)\n";
    return 1;
  } catch (const std::exception& e) {
    meshsim::cli::cli_err() << "internal error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    meshsim::cli::cli_err() << "internal error: an unknown exception\n";
    return 1;
  }
  // Everything printed must have reached stdout (a full disk or a closed pipe is a failure).
  meshsim::cli::cli_out().flush();
  if (!meshsim::cli::cli_out()) {
    meshsim::cli::cli_err() << "error: stdout: write failed\n";
    return 1;
  }
  return code;
}
