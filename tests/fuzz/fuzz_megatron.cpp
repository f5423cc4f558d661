// Fuzzes the Megatron-LM launch-line reader (train --from-megatron): any line it accepts must
// give a layout that fills the cluster and a positive micro-batch, and its architecture check
// must answer, not crash.
#include "fuzz_common.hpp"
#include "model/model_spec.hpp"
#include "report/megatron_line.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto line = meshsim::parse_megatron_line(text, "--from-megatron");
    meshsim::ModelSpec model;
    model.name = "fuzz";
    model.hidden = 4096;
    model.layers = 32;
    model.heads = 32;
    model.kv_heads = 8;
    model.head_dim = 128;
    model.ffn = 14336;
    model.vocab = 128256;
    (void)meshsim::megatron_architecture_mismatch(line, model);
    constexpr std::int64_t kWorld = 1024;
    const auto job = meshsim::megatron_job(line, kWorld, model.layers, "--from-megatron");
    if (job.config.mesh.world() != kWorld) __builtin_trap();
    if (job.job.micro_batch < 1 || job.config.schedule.virtual_stages < 1) __builtin_trap();
    if (job.config.zero < 0 || job.config.zero > 3) __builtin_trap();
  });
}
