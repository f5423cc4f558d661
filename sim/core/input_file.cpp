#include "core/input_file.hpp"

#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.hpp"

namespace meshsim {

std::string read_input_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw Error(path, "", "cannot open file");
  if (fs::is_directory(st)) throw Error(path, "", "is a directory, not an input file");
  if (!fs::is_regular_file(st))
    throw Error(path, "", "is not a regular file (a FIFO, socket or device cannot be an input)");
  const auto size = fs::file_size(path, ec);
  if (ec) throw Error(path, "", "cannot read its size: " + ec.message());
  if (size > kMaxInputBytes)
    throw Error(path, "",
                "is " + std::to_string(size >> 20) + " MiB; inputs are limited to " +
                    std::to_string(kMaxInputBytes >> 20) + " MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "", "cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path, "", "read failed");
  return ss.str();
}

void require_bundled_name_or_file(const std::string& name_or_file, const char* kind,
                                  const std::vector<std::string>& bundled) {
  if (std::filesystem::exists(name_or_file)) return;
  throw Error(name_or_file, "",
              fmt::format("is neither a bundled {} ({}) nor {} {} file that exists", kind,
                          fmt::join(bundled, ", "), kind[0] == 'e' ? "an" : "a", kind));
}

}  // namespace meshsim
