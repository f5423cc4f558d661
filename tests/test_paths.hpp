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
// A bundled model file by name ("llama3.1-8b").
inline std::string model_path(const std::string& name) {
  return source_path("workloads/models/" + name + ".json");
}
inline const char* cli_path() {
  return MESHSIM_CLI;
}
}  // namespace meshsim::test
