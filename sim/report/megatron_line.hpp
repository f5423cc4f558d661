#pragma once
// A Megatron-LM launch line read back into a job and a layout: what `--emit megatron` writes, and
// the parallelism, batch, sequence, recompute and precision flags of the usual recipes. The
// architecture flags it carries are checked against the model being simulated.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_spec.hpp"
#include "parallel/parallel_config.hpp"
#include "report/launch_config.hpp"

namespace meshsim {

// The flags as given ("--swiglu" → ""), after the script (`pretrain_gpt.py`) when the line has
// one; `#` comment lines, `\` line continuations and shell quotes are handled.
struct MegatronLine {
  std::map<std::string, std::string, std::less<>> flags;
  std::vector<std::string> ignored;  // flags meshsim does not read (data paths, lr, logging, ...)
};

// Errors: Error("", where, ...) naming the flag (a value that is not a number, a recompute
// method or precision meshsim does not model).
MegatronLine parse_megatron_line(std::string_view text, const std::string& where);

using MegatronJob = LaunchLayout;

// The layout on `world` GPUs: Megatron gives no data-parallel degree, it is what fills them
// (world / (tp·pp·cp)); `layers` is the model's, for --num-layers-per-virtual-pipeline-stage.
MegatronJob megatron_job(const MegatronLine& line, std::int64_t world, std::int64_t layers,
                         const std::string& where);

// The first architecture flag of the line that disagrees with `model` ("--hidden-size 4096, but
// the model llama3.1-70b has 8192"), or nothing. Only flags the line gives are compared, and
// --swiglu / --untie-embeddings-and-output-weights once it gives any architecture flag (their
// absence is Megatron's GELU / tied default).
std::optional<std::string> megatron_architecture_mismatch(const MegatronLine& line,
                                                          const ModelSpec& model);

}  // namespace meshsim
