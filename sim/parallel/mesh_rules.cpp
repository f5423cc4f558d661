#include "parallel/mesh_rules.hpp"

#include <string>

#include "core/error.hpp"

namespace meshsim {
namespace {

[[noreturn]] void fail(const std::string& flag, const std::string& what) {
  throw Error("", flag, what);
}

std::string s(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

void check_mesh(const ModelSpec& model, const ParallelConfig& config, const MeshJob& job) {
  const auto& m = config.mesh;
  if (model.has_architecture()) {
    if (model.heads % m.tp != 0)
      fail("--mesh", "tp=" + s(m.tp) + " does not divide the " + s(model.heads) +
                         " attention heads of " + model.name);
    if (model.kv_heads % m.tp != 0 && m.tp % model.kv_heads != 0)
      fail("--mesh", "tp=" + s(m.tp) + " and the " + s(model.kv_heads) + " KV heads of " +
                         model.name +
                         " do not divide one another (KV heads are split or replicated evenly)");
    const std::int64_t v =
        config.schedule.kind == ScheduleKind::interleaved ? config.schedule.virtual_stages : 1;
    if (m.pp * v > model.layers)
      fail("--mesh", "pp=" + s(m.pp) + (v > 1 ? " × " + s(v) + " virtual stages" : "") +
                         " needs at least that many layers; " + model.name + " has " +
                         s(model.layers));
    if (model.moe) {
      if (model.moe->experts % m.ep != 0)
        fail("--mesh", "ep=" + s(m.ep) + " does not divide the " + s(model.moe->experts) +
                           " experts of " + model.name);
      if (m.tp > 1 && !config.sp)
        fail("--sp", "MoE layers with tp > 1 need sequence parallelism (as in Megatron-Core)");
    } else if (m.ep > 1) {
      fail("--mesh", "ep=" + s(m.ep) + " but " + model.name + " has no experts");
    }
    if (job.seq > 0) {
      const std::int64_t unit = job.causal && m.cp > 1 ? 2 * m.cp : m.cp;
      if (job.seq % unit != 0)
        fail("--seq", "sequence " + s(job.seq) + " is not a multiple of " + s(unit) +
                          (unit == 2 * m.cp ? " (2 × cp: causal load balancing gives each CP rank "
                                              "two chunks)"
                                            : " (cp)"));
    }
  }
  if (config.schedule.kind == ScheduleKind::one_f_one_b_overlap && m.pp > 1)
    fail("--schedule",
         "1f1b-overlap needs pp = 1: on a one-directional pipeline a merged pair's backward "
         "waits for the whole pair downstream (DualPipe's two directions, which avoid that, are "
         "not modelled)");
  if (config.sp && m.tp == 1) fail("--sp", "sequence parallelism needs tp > 1");
  if (config.zero < 0 || config.zero > 3) fail("--zero", "must be 0, 1, 2 or 3");
  if (m.fsdp > 0 && config.zero == 0)
    fail("--mesh", "fsdp=" + s(m.fsdp) +
                       " shards ZeRO/FSDP state over a sub-group; it needs --zero 1, 2 or 3");
  const auto batch_fail = [&job](const std::string& what) {
    const auto& from = job.batch_from;
    throw Error(from.file, from.field, what + from.note);
  };
  if (job.global_batch > 0 && job.global_batch % (m.dp * job.micro_batch) != 0)
    batch_fail("global batch " + s(job.global_batch) +
               " is not a multiple of dp × micro-batch = " + s(m.dp * job.micro_batch));
  // Every micro-batch is simulated op by op: a step of 2^30 of them would allocate without bound.
  if (job.global_batch > 0 && job.micro_batch > 0 &&
      job.global_batch / (m.dp * job.micro_batch) > kMaxMicrobatches)
    batch_fail("global batch " + s(job.global_batch) + " is " +
               s(job.global_batch / (m.dp * job.micro_batch)) +
               " micro-batches per step for dp × micro-batch = " + s(m.dp * job.micro_batch) +
               "; the limit is " + s(kMaxMicrobatches));
  if (job.pipeline_steps < 1) fail(job.steps_field, "must be a positive integer");
  if (job.pipeline_steps > 1) {
    if (m.pp == 1)
      fail(job.steps_field,
           "runs the step as " + s(job.pipeline_steps) + " pipeline schedules; it needs pp > 1");
    const std::int64_t micro = job.global_batch > 0 && job.micro_batch > 0
                                   ? job.global_batch / (m.dp * job.micro_batch)
                                   : 0;
    if (micro > 0 && micro % job.pipeline_steps != 0)
      fail(job.steps_field, s(job.pipeline_steps) + " pipeline schedules do not divide the " +
                                s(micro) + " micro-batches per step");
  }
}

}  // namespace meshsim
