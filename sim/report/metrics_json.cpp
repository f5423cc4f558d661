#include "report/metrics_json.hpp"

namespace meshsim {

Json mesh_json(const Mesh& m) {
  return {{"dp", m.dp}, {"tp", m.tp}, {"pp", m.pp},
          {"cp", m.cp}, {"ep", m.ep}, {"fsdp", m.fsdp > 0 ? m.fsdp : m.dp}};
}

Json memory_json(const MemoryBreakdown& b) {
  Json j = Json::object();
  for (const auto& c : memory_categories(b)) j[c.name] = c.bytes;
  return j;
}

Json map_json(const std::map<std::string, double>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

Json training_json(const TrainingResult& r) {
  Json j;
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["compute_s"] = r.compute_s;
  j["interference_s"] = r.interference_s;
  j["comm_interference_s"] = r.comm_interference_s;
  j["stack"] = r.stack;
  j["tp_overlap"] = r.tp_overlap;
  if (!r.cp_comm.empty()) j["cp_comm"] = r.cp_comm;
  j["bubble_s"] = r.bubble_s;
  j["bubble_fraction"] = r.bubble_fraction;
  j["host_wait_s"] = r.host_wait_s;
  j["exposed_comm_s"] = map_json(r.exposed_comm_s);
  j["exposed_comm_by_op_s"] = map_json(r.exposed_comm_by_op_s);
  j["comm_bytes_per_gpu"] = map_json(r.comm_bytes_per_gpu);
  j["memory"] = memory_json(r.memory);
  j["memory"]["total"] = r.memory.total();
  j["memory"]["stage"] = r.memory.stage;
  return j;
}

Json latency_json(const LatencySummary& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}

Json serving_json(const ServingResult& r) {
  return {{"ttft_s", latency_json(r.ttft)},
          {"tpot_s", latency_json(r.tpot)},
          {"itl_s", latency_json(r.itl)},
          {"e2e_s", latency_json(r.e2e)},
          {"scheduling_delay_s", latency_json(r.scheduling_delay)},
          {"throughput",
           {{"requests_per_s", r.requests_per_s},
            {"output_tokens_per_s", r.output_tokens_per_s},
            {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu}}},
          {"goodput_requests_per_s", r.goodput_requests_per_s},
          {"completed", r.completed},
          {"rejected", r.rejected},
          {"preemptions", r.preemptions},
          {"iterations", r.iterations},
          {"makespan_s", r.makespan_s},
          {"output_tokens", r.output_tokens},
          {"mean_in_system", r.mean_in_system},
          {"peak_in_system", r.peak_in_system},
          {"warmup_requests", r.warmup_requests},
          {"gpus", r.gpus},
          {"kv_cache",
           {{"blocks_per_replica", r.capacity.blocks},
            {"block_size", r.capacity.block_size},
            {"tokens_per_replica", r.capacity.tokens()},
            {"bytes_per_token_per_gpu", r.capacity.kv_bytes_per_token_rank},
            {"utilization_mean", r.kv_utilization_mean},
            {"utilization_peak", r.kv_utilization_peak}}},
          {"swap",
           {{"out_blocks", r.swapped_out_blocks},
            {"in_blocks", r.swapped_in_blocks},
            {"seconds", r.swap_seconds}}},
          {"prefix_cache",
           {{"enabled", r.prefix_cache.enabled},
            {"queried_tokens", r.prefix_cache.queried_tokens},
            {"hit_tokens", r.prefix_cache.hit_tokens},
            {"saved_prefill_tokens", r.prefix_cache.hit_tokens},
            {"hit_rate", r.prefix_cache.hit_rate},
            {"hit_requests", r.prefix_cache.hit_requests},
            {"miss_requests", r.prefix_cache.miss_requests},
            {"ttft_hit_s", latency_json(r.prefix_cache.ttft_hit)},
            {"ttft_miss_s", latency_json(r.prefix_cache.ttft_miss)}}},
          {"speculative",
           {{"enabled", r.speculative.enabled},
            {"verify_steps", r.speculative.steps},
            {"proposed_tokens", r.speculative.proposed},
            {"accepted_tokens", r.speculative.accepted},
            {"acceptance_rate", r.speculative.acceptance_rate},
            {"tokens_per_step", r.speculative.tokens_per_step},
            {"expected_tokens_per_step", r.speculative.expected_tokens_per_step}}},
          {"kv_transfer_s", latency_json(r.kv_transfer)},
          {"kv_transfer_bytes", r.kv_transfer_bytes},
          {"memory", memory_json(r.capacity.memory)},
          {"notes", r.notes}};
}

}  // namespace meshsim
