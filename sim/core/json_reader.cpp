#include "core/json_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/input_file.hpp"
#include "core/memory_budget.hpp"

namespace meshsim {
namespace {

std::string type_name(const Json& v) {
  return v.type_name();
}

// nlohmann reports a byte offset; users want a line and column.
std::string line_column(const std::string& text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < text.size() && i + 1 < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + " column " + std::to_string(col);
}

std::string escape_key(std::string_view key) {
  // RFC 6901 escaping so paths stay unambiguous.
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// A SAX handler that only looks for a key given twice in one object.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& file) : file_(file) {}
  bool null() { return scalar(); }
  bool boolean(bool) { return scalar(); }
  bool number_integer(Json::number_integer_t) { return scalar(); }
  bool number_unsigned(Json::number_unsigned_t) { return scalar(); }
  bool number_float(Json::number_float_t, const Json::string_t&) { return scalar(); }
  bool string(Json::string_t&) { return scalar(); }
  bool binary(Json::binary_t&) { return scalar(); }
  bool start_object(std::size_t) { return start(true); }
  bool start_array(std::size_t) { return start(false); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool key(Json::string_t& k) {
    auto& f = open_.back();
    f.key = k;
    if (!f.insert(k))
      throw Error(file_, path_to(escape_key(k)),
                  "duplicate key (an object may give each key once)");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  struct Frame {
    bool object = false;
    std::string name;  // this container's segment in its parent
    // Keys seen: a short list scanned (most objects are small), a set past 16 keys.
    std::vector<std::string> few;
    std::set<std::string, std::less<>> many;
    std::string key;       // object: the key whose value comes next
    std::size_t next = 0;  // array: the next element's index
    bool insert(const std::string& k) {
      if (many.empty()) {
        if (std::find(few.begin(), few.end(), k) != few.end()) return false;
        few.push_back(k);
        if (few.size() > 16) many.insert(few.begin(), few.end());
        return true;
      }
      return many.insert(k).second;
    }
  };
  bool scalar() {
    if (!open_.empty() && !open_.back().object) ++open_.back().next;
    return true;
  }
  bool start(bool object) {
    Frame f;
    f.object = object;
    if (!open_.empty()) {
      auto& parent = open_.back();
      f.name = parent.object ? escape_key(parent.key) : std::to_string(parent.next++);
    }
    open_.push_back(std::move(f));
    return true;
  }
  bool end() {
    if (!open_.empty()) open_.pop_back();
    return true;
  }
  std::string path_to(const std::string& last) const {
    std::string p;
    for (std::size_t i = 1; i < open_.size(); ++i) p += "/" + open_[i].name;
    return p + "/" + last;
  }
  const std::string& file_;
  std::vector<Frame> open_;
};

}  // namespace

Json parse_json_text(const std::string& text, const std::string& file) {
  // Duplicate keys are an error, not "the last one wins": a SAX pass (no document built) sees
  // every key, with a stack of open containers for the JSON path; then the normal parse.
  DuplicateKeyCheck check{file};
  Json::sax_parse(text, &check);  // syntax errors are left to the parse below
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string msg = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix.
    auto colon = msg.find(": ", msg.find("parse error"));
    std::string what = colon == std::string::npos ? msg : msg.substr(colon + 2);
    throw Error(file, line_column(text, e.byte), "malformed JSON: " + what);
  } catch (const Json::exception& e) {
    // A number literal too large for a double ("1e9999") is nlohmann's out_of_range.406.
    std::string msg = e.what();
    const auto close = msg.find("] ");
    throw Error(file, "",
                "malformed JSON: " + (close == std::string::npos ? msg : msg.substr(close + 2)));
  }
}

Json load_json_file(const std::string& path) {
  const std::string text = read_input_file(path);
  // A parsed document costs up to kJsonBytesPerInputByte times its text: checked against this
  // process's memory before parsing, so a large file is an error with the estimate, not an
  // out-of-memory halfway through (issue 19: 234 MB of JSON took 3.9 GB).
  const double need = static_cast<double>(text.size()) * kJsonBytesPerInputByte;
  if (const double budget = memory_budget_bytes(); need > budget)
    throw Error(path, "",
                fmt::format("{:.0f} MB of JSON would need ~{:.1f} GB to parse (~{:g}× its size); "
                            "the limit here is {:.1f} GB",
                            static_cast<double>(text.size()) / 1e6, need / 1e9,
                            kJsonBytesPerInputByte, budget / 1e9));
  return parse_json_text(text, path);
}

JsonRef::JsonRef(const Json& value, std::shared_ptr<const std::string> file, std::string path)
    : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

JsonRef JsonRef::root(const Json& value, const std::string& file) {
  return JsonRef(value, std::make_shared<const std::string>(file), "");
}

void JsonRef::fail(const std::string& what) const {
  throw Error(*file_, path_.empty() ? "/" : path_, what);
}

JsonRef JsonRef::child(std::string_view key) const {
  return JsonRef(value_->find(std::string(key)).value(), file_, path_ + "/" + escape_key(key));
}

JsonRef JsonRef::element(std::size_t i) const {
  return JsonRef((*value_)[i], file_, path_ + "/" + std::to_string(i));
}

double JsonRef::number() const {
  if (!value_->is_number()) fail("expected a number, found " + type_name(*value_));
  const double v = value_->get<double>();
  if (!std::isfinite(v)) fail("number is not finite");
  return v;
}

double JsonRef::positive_number() const {
  const double v = number();
  if (!(v > 0.0)) fail("must be greater than zero");
  return v;
}

double JsonRef::non_negative_number() const {
  const double v = number();
  if (v < 0.0) fail("must not be negative");
  return v;
}

double JsonRef::number_in(double lo, double hi) const {
  const double v = number();
  if (v < lo || v > hi) fail(fmt::format("must be a number from {:g} to {:g}", lo, hi));
  return v;
}

double JsonRef::positive_at_most(double hi) const {
  const double v = positive_number();
  if (v > hi) fail(fmt::format("must be at most {:g}", hi));
  return v;
}

std::int64_t JsonRef::integer() const {
  // An unsigned value past 2^63 - 1 would wrap to a negative one.
  if (value_->is_number_unsigned() &&
      value_->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    fail("integer too large (more than 2^63 - 1)");
  if (value_->is_number_integer()) return value_->get<std::int64_t>();
  if (value_->is_number_float()) {
    const double v = value_->get<double>();
    if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9.0e15)
      return static_cast<std::int64_t>(v);
  }
  fail("expected an integer, found " + (value_->is_number() ? value_->dump() : type_name(*value_)));
}

std::int64_t JsonRef::integer_in(std::int64_t lo, std::int64_t hi) const {
  const auto n = integer();
  if (n < lo || n > hi)
    fail("must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return n;
}

std::int64_t JsonRef::positive_integer() const {
  if (value_->is_number_unsigned() && value_->get<std::uint64_t>() > (1ULL << 62))
    fail("integer too large");
  const auto v = integer();
  if (v <= 0) fail("must be a positive integer");
  return v;
}

std::string JsonRef::string() const {
  if (!value_->is_string()) fail("expected a string, found " + type_name(*value_));
  return value_->get<std::string>();
}

std::string JsonRef::file_name() const {
  auto s = string();
  if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos)
    fail("'" + s + "' must be a bare file name, without a folder");
  return s;
}

bool JsonRef::boolean() const {
  if (!value_->is_boolean()) fail("expected true or false, found " + type_name(*value_));
  return value_->get<bool>();
}

std::vector<JsonRef> JsonRef::array() const {
  if (!value_->is_array()) fail("expected an array, found " + type_name(*value_));
  std::vector<JsonRef> out;
  out.reserve(value_->size());
  for (std::size_t i = 0; i < value_->size(); ++i) out.push_back(element(i));
  return out;
}

std::vector<JsonRef> JsonRef::non_empty_array() const {
  auto a = array();
  if (a.empty()) fail("must not be empty");
  return a;
}

Bytes JsonRef::bytes() const {
  if (value_->is_string()) return parse_size(value_->get<std::string>(), *file_, path_);
  if (value_->is_number_float()) {
    const double v = number();
    if (v < 0 || v > 1.8e19) fail("byte count out of range");
    return Bytes(static_cast<std::uint64_t>(std::llround(v)));
  }
  if (value_->is_number_unsigned()) return Bytes(value_->get<std::uint64_t>());
  const auto v = integer();
  if (v < 0) fail("byte count must not be negative");
  return Bytes(static_cast<std::uint64_t>(v));
}

ObjectReader::ObjectReader(const JsonRef& object) : self_(object) {
  if (!object.raw().is_object())
    object.fail("expected an object, found " + std::string(object.raw().type_name()));
}

bool ObjectReader::has(std::string_view key) const {
  return self_.raw().contains(std::string(key));
}

JsonRef ObjectReader::required(std::string_view key) {
  if (!has(key)) self_.fail("missing required field '" + std::string(key) + "'");
  used_.emplace(key);
  return self_.child(key);
}

std::optional<JsonRef> ObjectReader::optional(std::string_view key) {
  if (!has(key)) return std::nullopt;
  used_.emplace(key);
  return self_.child(key);
}

void ObjectReader::finish() const {
  for (const auto& [key, value] : self_.raw().items()) {
    if (!used_.contains(key)) {
      self_.child(key).fail(
          "unknown key '" + key + "'" +
          (used_.empty() ? ""
                         : fmt::format(" (this object takes: {}, ...)", fmt::join(used_, ", "))));
    }
  }
}

namespace {

// "8", "1.5K", "8GiB": a number times a binary multiple (K, KB and KiB all mean 2^10) of the
// suffixes `kind` allows; the whole value, rounded down when it is one. Errors say "invalid
// WHAT 'TEXT': ...".
double binary_multiple(std::string_view text, const std::string& where, const std::string& path,
                       const std::string& what, bool bytes) {
  auto bad = [&](const std::string& why) -> double {
    throw Error(where, path, "invalid " + what + " '" + std::string(text) + "': " + why);
  };
  const std::string suffixes = bytes ? "K, M, G or T" : "K or M";
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return bad("expected a number with an optional " + suffixes + " suffix");
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(std::string(text.substr(0, i)), &used);
    if (used != i) return bad("malformed number");
  } catch (const std::exception&) {
    return bad("malformed number");
  }
  std::string suffix(text.substr(i));
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, int> kByteSuffixes[] = {
      {"", 0},     {"B", 0},  {"K", 10},  {"KB", 10},  {"KIB", 10}, {"M", 20},  {"MB", 20},
      {"MIB", 20}, {"G", 30}, {"GB", 30}, {"GIB", 30}, {"T", 40},   {"TB", 40}, {"TIB", 40}};
  // Token counts: "8k" is the 8,192-token context of a model card, "1M" 2^20 tokens.
  static const std::pair<const char*, int> kCountSuffixes[] = {{"", 0}, {"K", 10}, {"M", 20}};
  int shift = -1;
  if (bytes) {
    for (const auto& [name, s] : kByteSuffixes)
      if (suffix == name) shift = s;
  } else {
    for (const auto& [name, s] : kCountSuffixes)
      if (suffix == name) shift = s;
  }
  if (shift < 0) return bad("unknown suffix (use " + suffixes + ")");
  const double scaled = value * std::ldexp(1.0, shift);
  if (!std::isfinite(scaled) || scaled > 1.8e19) return bad("too large");
  if (std::floor(scaled) != scaled)
    return bad(bytes ? "not a whole number of bytes" : "not a whole number");
  return scaled;
}

}  // namespace

Bytes parse_size(std::string_view text, const std::string& where, const std::string& path) {
  return Bytes(static_cast<std::uint64_t>(binary_multiple(text, where, path, "size", true)));
}

std::int64_t parse_token_count(std::string_view text, const std::string& where,
                               const std::string& path) {
  const double n = binary_multiple(text, where, path, "token count", false);
  // 2^40 tokens: past any sequence or batch, and exact in a double and an int64.
  if (n > std::ldexp(1.0, 40))
    throw Error(where, path, "invalid token count '" + std::string(text) + "': too large");
  return static_cast<std::int64_t>(n);
}

}  // namespace meshsim
