#include "core/error.hpp"

namespace meshsim {
namespace {
std::string compose(const std::string& where, const std::string& path, const std::string& what) {
  std::string s;
  if (!where.empty()) s += where + ":";
  if (!path.empty()) s += path + ":";
  if (!s.empty()) s += " ";
  return s + what;
}
}  // namespace

Error::Error(std::string where, std::string path, std::string what)
    : std::runtime_error(compose(where, path, what)),
      where_(std::move(where)),
      path_(std::move(path)),
      detail_(std::move(what)) {}

WriteError::WriteError(const std::string& path, const std::string& what)
    : std::runtime_error(path + ": " + what) {}

}  // namespace meshsim
