#pragma once
// Where tests find the repository's files and the built CLI.
#include <string>

namespace meshsim::test {
inline std::string source_path(const std::string& rel) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + rel;
}
inline std::string topology_path(const std::string& name) {
  return source_path("topologies/" + name);
}
inline const char* cli_path() {
  return MESHSIM_CLI;
}
}  // namespace meshsim::test
