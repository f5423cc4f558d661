#pragma once
// A workload file: either a model file by itself, or a training job naming its model
// ({model: "../models/x.json" | {...}, seq, global_batch, micro_batch, dtype}). Command-line flags
// override the job's values.
#include <cstdint>
#include <optional>
#include <string>

#include "compute/dtype.hpp"
#include "core/json_reader.hpp"
#include "model/model_spec.hpp"

namespace meshsim {

struct JobSpec {
  std::optional<std::int64_t> seq;
  std::optional<std::int64_t> global_batch;  // sequences per optimizer step
  std::optional<std::int64_t> micro_batch;
  std::optional<DType> dtype;
};

struct Workload {
  std::string name;  // the job's name, or the model's
  ModelSpec model;
  JobSpec job;
  std::string file;
};

// A model path in a job is relative to the job file (root.file()).
Workload read_workload(const JsonRef& root);
Workload load_workload(const std::string& path);

}  // namespace meshsim
