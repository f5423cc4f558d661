#include "search/result_json.hpp"

namespace meshsim {
namespace {

Json map_json(const std::map<std::string, double>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

std::map<std::string, double> json_map(const Json& j) {
  std::map<std::string, double> m;
  for (auto it = j.begin(); it != j.end(); ++it) m[it.key()] = it.value().get<double>();
  return m;
}

Json memory_of(const MemoryBreakdown& b) {
  return {b.weights,       b.gradients, b.optimizer, b.activations, b.temporary,
          b.communication, b.allocator, b.kv_cache,  b.stage,       b.activations_modeled};
}

MemoryBreakdown memory_from(const Json& j) {
  MemoryBreakdown b;
  b.weights = j[0];
  b.gradients = j[1];
  b.optimizer = j[2];
  b.activations = j[3];
  b.temporary = j[4];
  b.communication = j[5];
  b.allocator = j[6];
  b.kv_cache = j[7];
  b.stage = j[8];
  b.activations_modeled = j[9];
  return b;
}

Json units_json(const std::vector<RecomputeUnit>& units) {
  Json j = Json::array();
  for (const auto& u : units) j.push_back({u.ops, u.frees, u.needs, u.reruns_collectives});
  return j;
}

}  // namespace

Json to_json(const EvaluatedCandidate& e) {
  const auto& c = e.candidate;
  const auto& m = c.config.mesh;
  const auto& r = e.result;
  return {{"mesh", {m.dp, m.tp, m.pp, m.cp, m.ep, m.fsdp}},
          {"zero", c.config.zero},
          {"sp", c.config.sp},
          {"reshard", c.config.reshard_after_forward},
          {"recompute", static_cast<int>(c.config.recompute)},
          {"schedule",
           {static_cast<int>(c.config.schedule.kind), c.config.schedule.virtual_stages,
            c.config.schedule.overlap, c.config.schedule.group}},
          {"mbs", c.micro_batch},
          {"error", e.error},
          {"step", r.step_time_s},
          {"tokens", {r.tokens_per_s, r.tokens_per_s_per_gpu}},
          {"flops", {r.model_flops_per_step, r.model_tflops_per_gpu, r.mfu, r.hfu}},
          {"time",
           {r.compute_s, r.bubble_s, r.bubble_fraction, r.interference_s, r.comm_interference_s,
            r.host_wait_s}},
          {"stack", {c.stack, r.stack, r.tp_overlap, r.cp_comm}},
          {"recompute_units", units_json(c.config.recompute_units)},
          {"recompute_modules", c.config.recompute_modules},
          {"recompute_every",
           {c.config.recompute_every, c.config.recompute_block, c.config.recompute_group}},
          {"exposed", map_json(r.exposed_comm_s)},
          {"exposed_by_op", map_json(r.exposed_comm_by_op_s)},
          {"bytes", map_json(r.comm_bytes_per_gpu)},
          {"memory", memory_of(r.memory)},
          {"chunks", r.chunk_layers},
          {"tuned_split", r.tuned_split_note},
          {"microbatches", r.microbatches},
          {"gpus", r.gpus},
          {"notes", r.notes},
          {"reliability",
           {r.reliability.checkpoint_bytes, r.reliability.checkpoint_s, r.reliability.job_mtbf_s,
            r.reliability.checkpoint_interval_s, r.reliability.goodput_fraction}}};
}

EvaluatedCandidate evaluated_from_json(const Json& j) {
  EvaluatedCandidate e;
  auto& c = e.candidate;
  const auto& m = j["mesh"];
  c.config.mesh = {m[0], m[1], m[2], m[3], m[4], m[5]};
  c.config.zero = j["zero"];
  c.config.sp = j["sp"];
  c.config.reshard_after_forward = j["reshard"];
  c.config.recompute = static_cast<Recompute>(j["recompute"].get<int>());
  c.config.schedule = {static_cast<ScheduleKind>(j["schedule"][0].get<int>()), j["schedule"][1],
                       j["schedule"][2], j["schedule"][3]};
  c.micro_batch = j["mbs"];
  e.error = j["error"];
  auto& r = e.result;
  r.step_time_s = j["step"];
  r.tokens_per_s = j["tokens"][0];
  r.tokens_per_s_per_gpu = j["tokens"][1];
  r.model_flops_per_step = j["flops"][0];
  r.model_tflops_per_gpu = j["flops"][1];
  r.mfu = j["flops"][2];
  r.hfu = j["flops"][3];
  r.compute_s = j["time"][0];
  r.bubble_s = j["time"][1];
  r.bubble_fraction = j["time"][2];
  r.interference_s = j["time"][3];
  r.comm_interference_s = j["time"][4];
  r.host_wait_s = j["time"][5];
  c.stack = j["stack"][0];
  r.stack = j["stack"][1];
  r.tp_overlap = j["stack"][2];
  r.cp_comm = j["stack"][3];
  for (const auto& u : j["recompute_units"])
    c.config.recompute_units.push_back({.ops = u[0].get<std::vector<std::string>>(),
                                        .frees = u[1].get<std::vector<std::string>>(),
                                        .needs = u[2].get<std::string>(),
                                        .reruns_collectives = u[3].get<bool>()});
  c.config.recompute_modules = j["recompute_modules"].get<std::vector<std::string>>();
  c.config.recompute_every = j["recompute_every"][0];
  c.config.recompute_block = j["recompute_every"][1];
  c.config.recompute_group = j["recompute_every"][2];
  r.exposed_comm_s = json_map(j["exposed"]);
  r.exposed_comm_by_op_s = json_map(j["exposed_by_op"]);
  r.comm_bytes_per_gpu = json_map(j["bytes"]);
  r.memory = memory_from(j["memory"]);
  r.chunk_layers = j["chunks"].get<std::vector<std::int64_t>>();
  r.tuned_split_note = j["tuned_split"];
  r.microbatches = j["microbatches"];
  r.gpus = j["gpus"];
  r.notes = j["notes"].get<std::vector<std::string>>();
  const auto& rel = j["reliability"];
  r.reliability = {rel[0], rel[1], rel[2], rel[3], rel[4]};
  return e;
}

}  // namespace meshsim
