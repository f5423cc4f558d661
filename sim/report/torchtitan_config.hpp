#pragma once
// A torchtitan job config (TOML) read back into a job and a layout: what `--emit torchtitan`
// writes and the [parallelism], [training], [activation_checkpoint] and [model] keys of the
// usual configs. Keys meshsim does not read are listed, not errors (a real config has dozens).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_spec.hpp"
#include "report/megatron_line.hpp"

namespace meshsim {

struct TorchtitanConfig {
  LaunchLayout layout;               // dp from the cluster when data_parallel_shard_degree = -1
  std::string model_name, flavor;    // [model] name and flavor, as given
  std::vector<std::string> ignored;  // "section.key" meshsim does not read
};

// `world`: the cluster's GPUs (torchtitan's -1 shard degree takes what the others leave);
// `layers`: the model's, for pipeline_parallel_layers_per_stage. Errors: Error("", where, ...)
// naming the section, key and line.
TorchtitanConfig parse_torchtitan_toml(std::string_view text, std::int64_t world,
                                       std::int64_t layers, const std::string& where);

}  // namespace meshsim
