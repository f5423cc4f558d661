#pragma once
// A validation case file: {"description", other header strings, "cases": [...]}, read strictly.
// The document is held on the heap so the case references stay valid as the value moves.
#include <memory>
#include <string>
#include <vector>

#include "core/json_reader.hpp"

namespace meshsim {

struct CaseFile {
  std::unique_ptr<Json> doc;
  std::vector<JsonRef> cases;
};

// `header` names the top-level string keys besides "description" and "cases" the file must
// have (e.g. "tolerance_rule").
CaseFile read_case_file(const std::string& path, const std::vector<std::string>& header = {});

}  // namespace meshsim
