#pragma once
// Reading an input file whole, with the checks that keep a bad path from becoming a hang or an
// out-of-memory: the path must name a regular file (a directory, FIFO or device such as
// /dev/zero is an error, not something to read until memory runs out) of at most
// kMaxInputBytes (JSON costs about 16× its size in memory once parsed).
#include <cstdint>
#include <string>
#include <vector>

namespace meshsim {

inline constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{256} << 20;  // 256 MiB

// The file's bytes; Error(path, "", ...) naming what is wrong otherwise.
std::string read_input_file(const std::string& path);

// For `--stack NAME|FILE`-style arguments that were not a bundled name: throws Error naming the
// argument, the `kind` ("stack", "engine") and the bundled names when no such file exists.
void require_bundled_name_or_file(const std::string& name_or_file, const char* kind,
                                  const std::vector<std::string>& bundled);

}  // namespace meshsim
