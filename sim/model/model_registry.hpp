#pragma once
// Where a `--workload` argument points when it is not a file: a bundled model by its name
// ("llama3.1-70b") or Hugging Face id ("meta-llama/Llama-3.1-70B"), else a config.json in the
// local Hugging Face cache, else an error with the nearest known name.
#include <string>
#include <vector>

#include "model/workload.hpp"

namespace meshsim {

struct BundledModel {
  const char* file;  // "workloads/models/llama3.1-70b.json"
  const char* text;  // the file's JSON, compiled in (runs without the source tree)
};
const std::vector<BundledModel>& bundled_models();

// The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
// (huggingface_hub's order); empty when none is set and there is no home.
std::string hf_hub_cache_dir();

// An existing file is read as it is (load_workload). Otherwise `arg` is looked up as a bundled
// model name or id (case-insensitive), then as a hub id in `hub_cache` (its refs/main snapshot,
// or the only one); Error(arg, "", ...) naming what was tried and the nearest name otherwise.
Workload load_workload_or_model_id(const std::string& arg, const std::string& hub_cache);

}  // namespace meshsim
