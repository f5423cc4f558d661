// Fuzzes the model and job loaders (Hugging Face configs, the GPT form, {params}, job files).
#include "fuzz_common.hpp"
#include "memory/memory_model.hpp"
#include "model/param_count.hpp"
#include "model/workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::fuzz::parse(text);
    // A job naming its model by path would read files: only inline models here.
    if (doc.is_object() && doc.contains("model") && doc["model"].is_string()) return;
    const auto w = meshsim::read_workload(meshsim::JsonRef::root(doc, "fuzz.json"));
    const auto p = meshsim::count_params(w.model);
    if (w.model.has_architecture() && !(p.total >= 0)) __builtin_trap();  // NaN parameters
  });
}
