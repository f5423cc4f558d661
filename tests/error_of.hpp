#pragma once
// The one-line message of the meshsim::Error a call throws, or "" when it throws none.
#include <string>

#include "core/error.hpp"

namespace meshsim::test {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace meshsim::test
