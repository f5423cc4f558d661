// meshsim validate [--cases validation/] [--only NAME] [--json]
// Every case in the validation folder (collectives, training, stack deltas, serving, seed checks)
// simulated and compared with its published figure: a table (case, metric, measured, simulated,
// error) and the MAPE per group. Nothing in meshsim is fitted to these cases.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "core/json_reader.hpp"
#include "memory/seed_checks.hpp"
#include "network/collective_validation.hpp"
#include "report/validation_report.hpp"
#include "serving/serving_validation.hpp"
#include "training/training_validation.hpp"

namespace meshsim::cli {
namespace {

struct ValidateArgs {
  std::string cases = "validation";
  std::string only;
  bool json = false, quiet = false;
};

int run_validate(const ValidateArgs& a) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(a.cases))
    throw Error("", "--cases", "'" + a.cases + "' is not a folder of validation cases");
  // Case files name clusters and models relative to the repository the folder is in.
  const auto root = fs::absolute(a.cases).lexically_normal().parent_path().string();
  using Runner =
      std::vector<ValidationRow> (*)(const std::string&, const std::string&, const std::string&);
  const std::pair<const char*, Runner> files[] = {{"seed_checks.json", run_seed_checks},
                                                  {"collectives.json", run_collective_cases},
                                                  {"training.json", run_training_cases},
                                                  {"stack_deltas.json", run_stack_delta_cases},
                                                  {"serving.json", run_serving_cases}};
  std::vector<ValidationRow> rows;
  int found = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [file, run] : files) {
    const auto path = (fs::path(a.cases) / file).string();
    if (!fs::exists(path)) continue;
    ++found;
    const auto before = rows.size();
    for (auto& r : run(path, root, a.only)) rows.push_back(std::move(r));
    // Progress on stderr, one line per case file (stdout stays the table or the JSON).
    if (!a.quiet)
      cli_err() << fmt::format(
          "# validate: {} done, {} comparisons, {:.0f} s so far\n", file, rows.size() - before,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (found == 0)
    throw Error("", "--cases",
                "no seed_checks/collectives/training/stack_deltas/serving.json in " + a.cases);
  if (rows.empty()) throw Error("", "--only", "no case name contains '" + a.only + "'");
  cli_out() << (a.json ? json_text(validation_json(rows)) + "\n" : validation_text(rows, a.cases));
  return 0;
}

}  // namespace

Runner add_validate_command(CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand("validate", "Compare meshsim with every published case");
  cmd->add_option("--cases", a->cases, "Folder of case files")->capture_default_str();
  cmd->add_option("--only", a->only, "Run the cases whose name contains this");
  cmd->add_flag("--json", a->json, "Print one JSON document");
  cmd->add_flag("--quiet", a->quiet, "No progress on stderr");
  return [a] { return run_validate(*a); };
}

}  // namespace meshsim::cli
