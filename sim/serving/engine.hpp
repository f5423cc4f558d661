#pragma once
// A serving engine's behaviour as data (workloads/engines/*.json, `serve --engine NAME|FILE`):
// its scheduler (admission policy, batch limits, block size, watermark), where its KV budget
// comes from, whether an FP8 checkpoint gets an FP8 KV cache, and the CUDA-graph sizes its decode
// batches are padded to. Each file names its sources; the bundled ones are compiled in.
#include <string>
#include <string_view>
#include <vector>

#include "compute/dtype.hpp"
#include "core/json_reader.hpp"
#include "serving/scheduler.hpp"

namespace meshsim {

struct EngineProfile {
  std::string name, description, file;
  std::vector<std::string> sources;
  SchedulerOptions scheduler;  // the engine's defaults; serve's flags override them
  bool fp8_kv_with_fp8_weights = false;
};

// The KV dtype when none is given: FP8 with FP8 weights where the engine does so (TensorRT-LLM's
// FP8 recipes), else BF16 (vLLM's kv_cache_dtype "auto" is the activations' dtype).
DType default_kv_dtype(const EngineProfile& engine, DType weights);

std::string_view name_of(Admission a);
std::string_view name_of(KvBudget b);
std::string_view name_of(Preemption p);
// `--admission`'s value: one of the policies' names, else an error naming the flag.
Admission admission_flag(const std::string& text);

// Strict: unknown keys, bad enums, out-of-range numbers and inconsistent settings are one-line
// errors naming the file and JSON path.
EngineProfile read_engine(const JsonRef& ref);
EngineProfile load_engine(const std::string& path);
std::vector<std::string> bundled_engine_names();
const EngineProfile* bundled_engine(std::string_view name);
// A bundled engine by name, else an engine file.
EngineProfile resolve_engine(const std::string& name_or_file);

}  // namespace meshsim
