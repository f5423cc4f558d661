#include "parse_error.hpp"

#include <regex>
#include <sstream>
#include <vector>

namespace meshsim::cli {
namespace {

// The deepest subcommand the arguments reached ("meshsim calibrate fit").
const CLI::App* deepest(const CLI::App& app) {
  for (const auto* sub : app.get_subcommands())
    if (sub->parsed()) return deepest(*sub);
  return &app;
}

std::string command_name(const CLI::App& app) {
  std::string name;
  for (const CLI::App* a = &app; a; a = a->get_parent())
    name = a->get_parent() ? a->get_name() + (name.empty() ? "" : " " + name) : name;
  return "meshsim" + (name.empty() ? "" : " " + name);
}

std::string known_commands(const CLI::App& app) {
  std::string known;
  for (const auto* sub : app.get_subcommands({}))
    known += (known.empty() ? "" : ", ") + sub->get_name();
  return known;
}

}  // namespace

std::string parse_error_line(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const CLI::App& where = *deepest(app);
  const std::string what = e.what();
  std::smatch m;
  if (std::regex_match(what, m, std::regex(R"((\S+) is required)")))
    return m[1].str() + ": is required by '" + command_name(where) + "'";
  if (std::regex_match(what, m,
                       std::regex(R"(The following arguments? (?:was|were) not expected: (.*))"))) {
    // CLI11 lists a stray value before the unknown flag it belonged to ("5 --context"): the
    // first flag is the culprit.
    std::istringstream extras(m[1].str());
    std::string first, word;
    while (extras >> word)
      if (first.empty() || (first[0] != '-' && word[0] == '-')) first = word;
    return first + ": not an option of '" + command_name(where) + "' (see " + command_name(where) +
           " --help)";
  }
  if (std::regex_match(what, m, std::regex(R"((\S+): \d+ required \S+ missing)")))
    return m[1].str() + ": needs a value";
  if (std::regex_match(what, m, std::regex(R"(Could not convert: (\S+) = (.*))")))
    return m[1].str() + ": '" + m[2].str() + "' is not a valid value";
  if (std::regex_match(what, m, std::regex(R"((\S+): At Most 1 required but received (\d+))")))
    return m[1].str() + ": given " + m[2].str() + " times; give it once";
  if (what == "A subcommand is required") {
    // An argument that names no command is the likelier mistake than a missing one.
    const auto known = where.get_subcommands({});
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a.empty() || a[0] == '-') continue;
      bool is_command = false;
      for (const CLI::App* c = &where; c && !is_command; c = c->get_parent())
        is_command = a == c->get_name();
      if (!is_command)
        return a + ": not a command of '" + command_name(where) +
               "' (known: " + known_commands(where) + ")";
    }
    return command_name(where) + ": give a command (" + known_commands(where) + ")";
  }
  return what;
}

std::string inputs_of(const CLI::App& app) {
  const CLI::App& where = *deepest(app);
  std::string out = command_name(where);
  static const char* const kInputs[] = {"--topology", "--workload", "--nodes",
                                        "--mesh",     "--traffic",  "--calibration",
                                        "--stack",    "--engine",   "--degrade-link"};
  for (const char* flag : kInputs) {
    const CLI::Option* o = nullptr;
    try {
      o = where.get_option(flag);
    } catch (const CLI::OptionNotFound&) {
      continue;
    }
    if (o->count() == 0) continue;
    for (const auto& v : o->results()) out += std::string(" ") + flag + " " + v;
  }
  return out;
}

}  // namespace meshsim::cli
