#include "training/training_validation.hpp"

#include <fmt/format.h>

#include "compute/compute_model.hpp"
#include "core/case_file.hpp"
#include "core/enum_names.hpp"
#include "core/json_reader.hpp"
#include "model/model_loader.hpp"
#include "topology/topology_loader.hpp"
#include "training/training_sim.hpp"

namespace meshsim {

std::vector<ValidationRow> run_training_cases(const std::string& path, const std::string& root,
                                              const std::string& only) {
  const auto file = read_case_file(path);
  const auto& cases = file.cases;
  std::vector<ValidationRow> rows;
  for (const auto& c : cases) {
    ObjectReader r(c);
    ValidationRow row;
    row.name = r.required("name").string();
    row.group = r.required("group").string();
    const auto topo_name = r.required("topology").string();
    const auto nodes = static_cast<std::int32_t>(r.required("nodes").positive_integer());
    const auto workload = r.required("workload").string();
    TrainingSetup s;
    // Each case runs on the stack its source used, with that stack's documented settings.
    const auto stack_ref = r.required("stack");
    const auto* stack = bundled_stack(stack_ref.string());
    if (!stack) stack_ref.fail("no bundled stack '" + stack_ref.string() + "'");
    s.strategy.stack = *stack;
    s.strategy.tp_overlap = r.required("tp_overlap").boolean();
    const auto mesh = r.required("mesh");
    s.config.mesh = parse_mesh(mesh.string(), path + ":" + mesh.path());
    s.job.seq = r.required("seq").positive_integer();
    s.job.global_batch = r.required("gbs").positive_integer();
    s.job.micro_batch = r.required("mbs").positive_integer();
    const auto dt = r.required("dtype");
    const auto dtype = parse_dtype(dt.string());
    if (!dtype) dt.fail("unknown dtype '" + dt.string() + "'");
    s.job.dtype = *dtype;
    s.config.zero = static_cast<std::int32_t>(r.required("zero").integer());
    const auto rc = r.required("recompute");
    const auto* policy = stack->policy(rc.string());
    if (!policy)
      rc.fail("stack '" + stack->name + "' has no recompute policy '" + rc.string() + "'");
    s.config.recompute = policy->mode;
    s.config.recompute_ops = policy->ops;
    s.config.recompute_every = policy->every;
    s.job.flash_attention = r.required("attention").string() == "flash";
    const auto sched = r.required("schedule");
    s.config.schedule = parse_schedule(sched.string(), path + ":" + sched.path());
    const auto metric = r.required("metric");
    if (metric.string() != "achieved_tflops_per_gpu")
      metric.fail("expected achieved_tflops_per_gpu");
    row.metric = "TFLOP/s per GPU";
    row.unit = "TFLOP/s";
    row.measured = r.required("measured").positive_number();
    row.reading = r.required("reading").string();
    row.source = r.required("source").string();
    r.finish();
    if (!only.empty() && row.name.find(only) == std::string::npos) continue;
    // SC21 predates sequence parallelism (Korthikanti et al. 2022).
    s.config.sp = row.group != "megatron-sc21-a100" && s.config.mesh.tp > 1;
    s.memory.recipe = stack_recipe(*stack, s.job.dtype);
    const auto topo = load_topology(root + "/topologies/" + topo_name, {.nodes = nodes});
    const auto model = load_model(root + "/workloads/models/" + workload);
    const auto res = simulate_training(topo, model, s);
    const double peak = ComputeModel(topo.gpu).peak_flops(s.job.dtype) / 1e12;
    row.simulated = (s.config.recompute == Recompute::full ? res.hfu : res.mfu) * peak;
    row.detail = fmt::format("{} | {} | {} | {} | {:.2f} | {:.1f}% | {:.2f} / {:.2f} / {:.2f}",
                             stack->name + (*s.strategy.tp_overlap ? " +tp-overlap" : ""),
                             to_string(s.config.mesh), to_string(s.config.schedule),
                             name_of(s.config.recompute), res.step_time_s,
                             100 * res.bubble_fraction, res.exposed_comm_s.at("tp"),
                             res.exposed_comm_s.at("dp"), res.exposed_comm_s.at("pp"));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace meshsim
