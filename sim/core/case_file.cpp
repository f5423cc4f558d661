#include "core/case_file.hpp"

namespace meshsim {

CaseFile read_case_file(const std::string& path, const std::vector<std::string>& header) {
  CaseFile f;
  f.doc = std::make_unique<Json>(load_json_file(path));
  ObjectReader top(JsonRef::root(*f.doc, path));
  (void)top.required("description").string();
  for (const auto& key : header) (void)top.required(key).string();
  f.cases = top.required("cases").non_empty_array();
  top.finish();
  return f;
}

}  // namespace meshsim
