#pragma once
// Checks on a JSON document before it is printed: nlohmann writes NaN and infinity as `null`,
// so a non-finite number must be caught here, not found later by whoever reads the output.
#include <string>

#include "core/json_reader.hpp"

namespace meshsim {

// The JSON path ("/results/3/step_time_s") of the first NaN or infinity in `j`, in document
// order; "" when every number is finite.
std::string first_non_finite(const Json& j);

}  // namespace meshsim
