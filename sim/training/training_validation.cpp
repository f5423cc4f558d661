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
namespace {

// The job a case runs: cluster, model, mesh, batch, dtype, ZeRO stage, attention and schedule.
struct CaseJob {
  std::string topology, workload;
  std::int32_t nodes = 1;
  TrainingSetup setup;
};

DType read_dtype(const JsonRef& dt) {
  const auto dtype = parse_dtype(dt.string());
  if (!dtype) dt.fail("unknown dtype '" + dt.string() + "'");
  return *dtype;
}

CaseJob read_job(ObjectReader& r, const std::string& path) {
  CaseJob c;
  c.topology = r.required("topology").file_name();
  c.nodes = static_cast<std::int32_t>(r.required("nodes").integer_in(1, kMaxGpus));
  c.workload = r.required("workload").file_name();
  auto& s = c.setup;
  const auto mesh = r.required("mesh");
  s.config.mesh = parse_mesh(mesh.string(), path + ":" + mesh.path());
  s.job.seq = r.required("seq").positive_integer();
  s.job.global_batch = r.required("gbs").positive_integer();
  s.job.micro_batch = r.required("mbs").positive_integer();
  s.job.dtype = read_dtype(r.required("dtype"));
  s.config.zero = static_cast<std::int32_t>(r.required("zero").integer());
  s.job.flash_attention = r.required("attention").string() == "flash";
  const auto sched = r.required("schedule");
  s.config.schedule = parse_schedule(sched.string(), path + ":" + sched.path());
  return c;
}

// The software that runs it: a bundled stack (the one the source used, with its documented
// settings), TP communication overlap on or off, and one of the stack's recompute policies (its
// name is returned).
std::string read_case_stack(ObjectReader& r, TrainingSetup& s) {
  const auto stack_ref = r.required("stack");
  const auto* stack = bundled_stack(stack_ref.string());
  if (!stack) stack_ref.fail("no bundled stack '" + stack_ref.string() + "'");
  s.strategy.stack = *stack;
  s.strategy.tp_overlap = r.required("tp_overlap").boolean();
  const auto rc = r.required("recompute");
  const auto* policy = stack->policy(rc.string());
  if (!policy) rc.fail("stack '" + stack->name + "' has no recompute policy '" + rc.string() + "'");
  s.config.recompute = policy->mode;
  s.config.recompute_units = policy->units;
  s.config.recompute_every = policy->every;
  s.memory.recipe = stack_recipe(*stack, s.job.dtype);
  return rc.string();
}

std::string stack_label(const TrainingSetup& s) {
  return s.strategy.stack.name + (s.strategy.tp_overlap.value_or(false) ? " +tp-overlap" : "");
}

Topology case_topology(const CaseJob& c, const std::string& root) {
  return load_topology(root + "/topologies/" + c.topology, {.nodes = c.nodes});
}

TrainingResult run(const CaseJob& c, const Topology& topo, const TrainingSetup& s,
                   const std::string& root) {
  return simulate_training(topo, load_model(root + "/workloads/models/" + c.workload), s);
}

}  // namespace

std::vector<ValidationRow> run_training_cases(const std::string& path, const std::string& root,
                                              const std::string& only) {
  const auto file = read_case_file(path);
  std::vector<ValidationRow> rows;
  for (const auto& c : file.cases) {
    ObjectReader r(c);
    ValidationRow row;
    row.name = r.required("name").string();
    row.group = r.required("group").string();
    auto job = read_job(r, path);
    auto& s = job.setup;
    // Each case runs on the stack its source used, with that stack's documented settings.
    read_case_stack(r, s);
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
    const auto topo = case_topology(job, root);
    const auto res = run(job, topo, s, root);
    const double peak = ComputeModel(topo.gpu).peak_flops(s.job.dtype) / 1e12;
    row.simulated = (s.config.recompute == Recompute::full ? res.hfu : res.mfu) * peak;
    row.detail = fmt::format("{} | {} | {} | {} | {:.2f} | {:.1f}% | {:.2f} / {:.2f} / {:.2f}",
                             stack_label(s), to_string(s.config.mesh), to_string(s.config.schedule),
                             name_of(s.config.recompute), res.step_time_s,
                             100 * res.bubble_fraction, res.exposed_comm_s.at("tp"),
                             res.exposed_comm_s.at("dp"), res.exposed_comm_s.at("pp"));
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

struct DeltaCase {
  ValidationRow row;
  CaseJob job;
  TrainingSetup base, variant;
  std::string policy;  // the base's recompute policy, by the stack's name for it
};

// Every case of the file, read strictly before any runs, so a bad field anywhere fails at once.
std::vector<DeltaCase> read_delta_cases(const std::string& path) {
  const auto file = read_case_file(path);
  std::vector<DeltaCase> cases;
  for (const auto& c : file.cases) {
    ObjectReader r(c);
    DeltaCase k;
    k.row.name = r.required("name").string();
    k.row.group = r.required("group").string();
    k.job = read_job(r, path);
    k.base = k.variant = k.job.setup;
    for (auto [key, setup] : {std::pair{"base", &k.base}, std::pair{"variant", &k.variant}}) {
      ObjectReader side(r.required(key));
      // A side may train in another dtype (torchtitan's Float8 against bf16); before the stack,
      // whose state bytes depend on it.
      if (auto dt = side.optional("dtype")) setup->job.dtype = read_dtype(*dt);
      const auto policy = read_case_stack(side, *setup);
      if (setup == &k.base) k.policy = policy;
      side.finish();
      setup->config.sp = setup->config.mesh.tp > 1;
    }
    const auto metric = r.required("metric");
    if (metric.string() != "speedup") metric.fail("expected speedup");
    k.row.metric = "speedup";
    k.row.unit = "x";
    k.row.measured = r.required("measured").positive_number();
    k.row.reading = r.required("reading").string();
    k.row.source = r.required("source").string();
    r.finish();
    cases.push_back(std::move(k));
  }
  return cases;
}

}  // namespace

std::size_t read_stack_delta_file(const std::string& path) {
  return read_delta_cases(path).size();
}

std::vector<ValidationRow> run_stack_delta_cases(const std::string& path, const std::string& root,
                                                 const std::string& only) {
  std::vector<ValidationRow> rows;
  for (auto& k : read_delta_cases(path)) {
    if (!only.empty() && k.row.name.find(only) == std::string::npos) continue;
    const auto topo = case_topology(k.job, root);
    const auto b = run(k.job, topo, k.base, root), v = run(k.job, topo, k.variant, root);
    k.row.simulated = b.step_time_s / v.step_time_s;
    // The dtypes are named where the two sides differ in them.
    const auto label = [&](const TrainingSetup& s) {
      return stack_label(s) + (k.base.job.dtype != k.variant.job.dtype
                                   ? " " + std::string(name_of(s.job.dtype))
                                   : std::string());
    };
    k.row.detail =
        fmt::format("{} → {} | {} | {} | {:.3f} → {:.3f}", label(k.base), label(k.variant),
                    to_string(k.base.config.mesh), k.policy, b.step_time_s, v.step_time_s);
    rows.push_back(std::move(k.row));
  }
  return rows;
}

}  // namespace meshsim
