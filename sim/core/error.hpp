#pragma once
// One error type for everything a user can get wrong. It carries where the problem is (file and
// JSON path, or a command-line flag) so the CLI prints `error: <file>:<path>: <what>` and exits 2.
#include <stdexcept>
#include <string>

namespace meshsim {

class Error : public std::runtime_error {
 public:
  // `where` is a file name (may be empty), `path` a JSON path like `/links/3/bandwidth_GBps`,
  // a line like `line 4`, or a flag like `--nodes`.
  Error(std::string where, std::string path, std::string what);
  const std::string& where() const { return where_; }
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string where_, path_, detail_;
};

// Output that did not reach its destination (a full disk, /dev/full, a closed pipe): not the
// user's input, so the CLI prints `error: <path>: <what>` and exits 1.
class WriteError : public std::runtime_error {
 public:
  WriteError(const std::string& path, const std::string& what);
};

}  // namespace meshsim
