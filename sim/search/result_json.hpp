#pragma once
// An evaluated candidate as JSON and back, exactly (doubles round-trip): how MPI ranks hand their
// results to rank 0.
#include "core/json_reader.hpp"
#include "search/search.hpp"

namespace meshsim {

Json to_json(const EvaluatedCandidate& e);
EvaluatedCandidate evaluated_from_json(const Json& j);

}  // namespace meshsim
