#pragma once
// libFuzzer harness helpers: an input is a candidate file. A loader may accept it or throw
// meshsim::Error (the one-line error a user sees); anything else escaping (another exception,
// a crash, a sanitizer report, a hang, runaway memory) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace meshsim::fuzz {

template <class F>
int run(const std::uint8_t* data, std::size_t size, F&& body) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    body(text);
  } catch (const meshsim::Error&) {
    // A clear error: what the loaders must do with bad input.
  }
  return 0;
}

// Parses JSON (a syntax error is an Error naming line and column).
inline Json parse(const std::string& text) {
  return parse_json_text(text, "fuzz.json");
}

}  // namespace meshsim::fuzz
