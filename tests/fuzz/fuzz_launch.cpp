// Fuzzes the launch-configuration readers (train --from-megatron, --from-torchtitan): any
// Megatron line or torchtitan TOML they accept must give a layout that fills the cluster and a
// positive micro-batch on a bundled stack, and the architecture check must answer, not crash.
#include "fuzz_common.hpp"
#include "model/model_spec.hpp"
#include "report/megatron_line.hpp"
#include "report/torchtitan_config.hpp"
#include "stack/stack.hpp"

namespace {

constexpr std::int64_t kWorld = 1024;

void check(const meshsim::LaunchLayout& l) {
  if (l.config.mesh.world() != kWorld) __builtin_trap();
  if (l.job.micro_batch < 1 || l.config.schedule.virtual_stages < 1) __builtin_trap();
  // A micro-batch group and the merged pairs only where Megatron runs them: a group with virtual
  // stages, merged pairs on a pipeline only with them.
  const auto& s = l.config.schedule;
  if (s.group < 0 || (s.group > 0 && s.virtual_stages < 2)) __builtin_trap();
  if (s.overlap && (s.kind != meshsim::ScheduleKind::interleaved || s.virtual_stages < 2))
    __builtin_trap();
  if (s.kind == meshsim::ScheduleKind::one_f_one_b_overlap && l.config.mesh.pp != 1)
    __builtin_trap();
  // The stack named is a bundled one, and async TP only with compile.
  if (l.stack.name.empty() || !meshsim::bundled_stack(l.stack.name)) __builtin_trap();
  if (l.stack.tp_overlap && l.stack.name == "torchtitan") __builtin_trap();
  if (l.config.zero < 0 || l.config.zero > 3) __builtin_trap();
  // Megatron's recompute methods only on a full recompute, with a positive count.
  if (l.config.recompute_block < 0 || l.config.recompute_group < 1) __builtin_trap();
  if ((l.config.recompute_block > 0 || l.config.recompute_group > 1) &&
      l.config.recompute != meshsim::Recompute::full)
    __builtin_trap();
  // A global batch split over dp (0: not given). Megatron's must split into whole micro-batches
  // too (checked below), and so must torchtitan's local batches with PP.
  if (l.job.global_batch < 0 || l.job.global_batch % l.config.mesh.dp != 0) __builtin_trap();
  // Pipeline steps: 1 without a pipeline, else whole steps of whole micro-batches.
  const auto steps = l.job.pipeline_steps;
  if (steps < 1 || (steps > 1 && l.config.mesh.pp == 1)) __builtin_trap();
  if (steps > 1 && l.job.global_batch % (l.config.mesh.dp * l.job.micro_batch * steps) != 0)
    __builtin_trap();
  // A split given is one positive layer count per pipeline chunk; a stack split is an even one
  // with ends weighed within the loader's bounds.
  if (!l.chunk_layers.empty()) {
    const auto chunks =
        l.config.mesh.pp *
        (s.kind == meshsim::ScheduleKind::interleaved ? s.virtual_stages : std::int64_t{1});
    if (static_cast<std::int64_t>(l.chunk_layers.size()) != chunks) __builtin_trap();
    for (const auto n : l.chunk_layers)
      if (n < 1) __builtin_trap();
  }
  if (const auto& p = l.stack.pipeline_split;
      p && (p->method != meshsim::PipelineSplitMethod::even || p->embedding_layers < 0 ||
            p->embedding_layers > 8 || p->loss_layers < 0 || p->loss_layers > 8))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meshsim::fuzz::run(data, size, [](const std::string& text) {
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
    const auto job = meshsim::megatron_job(line, kWorld, model.layers, "--from-megatron");
    check(job);
    if (job.job.global_batch % (job.job.micro_batch * job.config.mesh.dp) != 0) __builtin_trap();
  });
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    check(meshsim::parse_torchtitan_toml(text, kWorld, 32, "fuzz.toml").layout);
  });
}
