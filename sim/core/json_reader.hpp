#pragma once
// Strict reading of JSON input files. Every value remembers its file and JSON path, so any
// problem becomes one `Error` naming both; object readers reject keys nobody asked for, so a
// typo in an input file is an error and never a silently ignored setting.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace meshsim {

using Json = nlohmann::json;

// Peak memory of parsing JSON, per byte of text, for the most expensive shapes: nlohmann::json
// keeps a 16-byte value per number (in vectors that grow by doubling) and a map node per key.
// Measured (`topo` on 4 MB files, peak RSS less the empty run): an array of 2 M one-digit numbers
// 20×, an array of 500 K one-key objects 24×; issue 19 measured 16.7× on a 234 MB file. Rounded up.
inline constexpr double kJsonBytesPerInputByte = 25;

// Reads and parses a file; a syntax error names the line and column. A file whose parse would
// need more than memory_budget_bytes() (at kJsonBytesPerInputByte) is refused with the estimate.
Json load_json_file(const std::string& path);
Json parse_json_text(const std::string& text, const std::string& file);

class JsonRef {
 public:
  JsonRef(const Json& value, std::shared_ptr<const std::string> file, std::string path);
  static JsonRef root(const Json& value, const std::string& file);

  const Json& raw() const { return *value_; }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(const std::string& what) const;

  JsonRef child(std::string_view key) const;  // caller guarantees the key exists
  JsonRef element(std::size_t i) const;

  double number() const;
  double positive_number() const;  // > 0 and finite
  double non_negative_number() const;
  // lo ≤ v ≤ hi: "must be a number from lo to hi". Physical quantities get a ceiling so that a
  // scaled value (GB/s × 1e9, TFLOP/s × 1e12) stays finite: 1e308 GB/s is not a link.
  double number_in(double lo, double hi) const;
  double positive_at_most(double hi) const;  // 0 < v ≤ hi
  std::int64_t integer() const;
  std::int64_t positive_integer() const;
  std::int64_t integer_in(std::int64_t lo,
                          std::int64_t hi) const;  // "must be an integer from lo to hi"
  std::string string() const;
  // A bare file name, which the reader joins to a folder of its own (topologies/, workloads/):
  // a folder in it ("../x", "/etc/x") could reach any file on the machine.
  std::string file_name() const;
  bool boolean() const;
  std::vector<JsonRef> array() const;
  std::vector<JsonRef> non_empty_array() const;
  // A byte count: an integer, or a string with a binary suffix ("80G", "64M").
  Bytes bytes() const;

 private:
  const Json* value_;
  std::shared_ptr<const std::string> file_;
  std::string path_;
};

class ObjectReader {
 public:
  explicit ObjectReader(const JsonRef& object);
  JsonRef required(std::string_view key);
  std::optional<JsonRef> optional(std::string_view key);
  bool has(std::string_view key) const;
  const JsonRef& self() const { return self_; }
  // Rejects the first key (in sorted order) that no required/optional call consumed.
  void finish() const;

 private:
  JsonRef self_;
  std::set<std::string, std::less<>> used_;
};

// Parses "8", "8G", "64M", "1.5K", "8GiB", "8GB" (binary multiples: 8G = 8·2^30 bytes, as the
// DESIGN.md command-line contract says). Throws Error(where, path, ...) on anything else.
Bytes parse_size(std::string_view text, const std::string& where, const std::string& path);

// A token count with an optional binary multiple: "8192", "8k" and "8K" are 8,192, "128K"
// 131,072, "1M" 2^20 (a model card's "8K context" is 8,192 tokens). Throws Error(where, path,
// ...) on anything else, a fraction or more than 2^40.
std::int64_t parse_token_count(std::string_view text, const std::string& where,
                               const std::string& path);

}  // namespace meshsim
