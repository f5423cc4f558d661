#pragma once
// What `meshsim validate` prints: every compared figure (case, metric, measured, simulated, error,
// and whether it is a known gap or outside its case's tolerance), then the mean absolute
// percentage error per group; as text or as one JSON document.
#include <map>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "core/validation_row.hpp"

namespace meshsim {

struct GroupError {
  double mape = 0;  // mean |error|, a fraction
  int cases = 0;
};
// Per group, in name order.
std::map<std::string, GroupError> mape_by_group(const std::vector<ValidationRow>& rows);

// A row with a tolerance of its own whose |error| exceeds it.
bool outside_tolerance(const ValidationRow& row);

// `source` names where the cases came from (the --cases folder).
std::string validation_text(const std::vector<ValidationRow>& rows, const std::string& source);
// {"cases": [{"group", "name", "metric", "unit", "measured", "simulated", "error", "detail",
//  "tolerance", "within_tolerance", "known_gap"}], "mape": {group: fraction}}
Json validation_json(const std::vector<ValidationRow>& rows);

}  // namespace meshsim
