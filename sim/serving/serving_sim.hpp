#pragma once
// A serving cluster on the event engine: R replicas of one (TP, PP) layout behind a router, or
// disaggregated prefill and decode pools whose KV transfers are flows on the cluster's links.
// Each replica runs iteration-level scheduling (scheduler.hpp); each pipeline stage is its own
// resource, so with PP several batches are in flight; iteration times come from StepCost.
//
// Latency definitions (reference/serving-model.md; vLLM's benchmark_serving): TTFT = first
// token computed − arrival (not when a client would receive it); TPOT = (E2E − TTFT) /
// (output tokens − 1) for requests with more than one output token; ITL = every gap between
// consecutive tokens of a request; scheduling delay = first scheduled − arrival. Throughput is
// over the makespan, first arrival to last completion.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compute/calibration_profile.hpp"
#include "memory/memory_model.hpp"
#include "model/model_spec.hpp"
#include "serving/latency_stats.hpp"
#include "serving/scheduler.hpp"
#include "serving/speculative.hpp"
#include "serving/step_cost.hpp"
#include "serving/traffic.hpp"
#include "strategy/comm_model.hpp"
#include "topology/topology.hpp"

namespace meshsim {

enum class RouterPolicy { round_robin, least_outstanding, jsq_tokens };
std::string_view name_of(RouterPolicy p);

struct ServingSetup {
  ReplicaShape shape;
  std::int64_t replicas = 1;
  // Disaggregated prefill/decode (Splitwise, DistServe): both > 0 replaces `replicas`.
  std::int64_t prefill_replicas = 0, decode_replicas = 0;
  SchedulerOptions scheduler;
  RouterPolicy router = RouterPolicy::least_outstanding;
  double slo_ttft_s = 0, slo_tpot_s = 0;  // 0: no limit
  // Closed loop (benchmark_serving --max-concurrency, MLPerf-style harnesses): `clients` > 0
  // clients each send their next request `think_time_s` (fixed, or exponential with that mean)
  // after their last one completes, taking the requests' lengths in order and ignoring their
  // arrival times. The first `clients` requests, sent together into an empty system, are
  // warm-up: left out of the latency statistics (not of throughput).
  std::int64_t clients = 0;
  double think_time_s = 0;
  bool think_exponential = false;
  std::uint64_t think_seed = 1;
  // Speculative decoding (its draft count is the replicas' scheduler.speculative_tokens).
  SpeculativeDecoding speculative;
  std::optional<CalibrationProfile> profile;
  MemoryOptions memory;
  bool record_iterations = false;
  // Tests: after every event, check request and KV-block conservation (O(requests) each).
  bool check_invariants = false;
  // Called with (finished requests, all requests) each time one finishes (the CLI's progress).
  std::function<void(std::size_t, std::size_t)> progress;

  bool disaggregated() const { return prefill_replicas > 0 && decode_replicas > 0; }
  std::int64_t total_replicas() const {
    return disaggregated() ? prefill_replicas + decode_replicas : replicas;
  }
};

// KV capacity of one replica, per rank, over the KV bytes per token of the fullest stage: the
// engine's budget (KvBudget: HBM × fraction − weights, workspace, communication buffers and
// runtime; fraction × what they leave; or HBM × fraction − weights), the fraction the one for
// the replica's TP. A speculative
// proposer's weights join the weights and its KV bytes per token the target's.
struct KvCapacity {
  MemoryBreakdown memory;  // without the KV cache
  double kv_bytes_per_token_rank = 0;
  std::int64_t blocks = 0;
  std::int64_t tokens() const;
  std::int64_t block_size = 16;
};
// Throws Error naming the layout when the weights and workspace leave no room for KV blocks.
KvCapacity kv_capacity(const Topology& topo, const ModelSpec& model, const ServingSetup& setup);

struct IterationRecord {
  std::int32_t replica = 0, stage = 0;
  double start_s = 0, end_s = 0;
  std::int64_t prefill_tokens = 0, decodes = 0;
  double kv_used = 0;  // the replica's KV blocks in use at the stage's end, of its total
};

// One request's life, for the trace's per-request slices (recorded with the iterations, for runs
// of at most kMaxRequestLog requests).
struct RequestRecord {
  std::int32_t id = 0, replica = -1;
  double arrival_s = 0, first_token_s = 0, finished_s = 0;
  std::int64_t prompt = 0, output = 0;
};
inline constexpr std::size_t kMaxRequestLog = 10000;

// The cluster's state after an event, for the report's time series (decimated, serving_sim.cpp):
// requests running (admitted, holding KV) and waiting (queued or swapped out) summed over the
// replicas, as vLLM's `num_requests_running` / `num_requests_waiting` gauges count them; the
// sequences in each replica's latest iteration, averaged over the replicas (0 for an idle one);
// output tokens emitted so far (throughput is its slope).
struct ServingSample {
  double t_s = 0, kv_used = 0, batch_sequences = 0;
  std::int64_t running = 0, waiting = 0, output_tokens = 0;
};

// Prefix caching (scheduler.hpp): prompt tokens looked up in the cache at admission (every
// admission, readmissions after preemption too, as vLLM counts its queries) and found cached
// (their prefill was skipped); the TTFT of prefix-group requests whose first admission found
// some of their prefix cached, against those that found none (warm-up excluded).
struct PrefixCacheStats {
  bool enabled = false;
  std::int64_t queried_tokens = 0, hit_tokens = 0;
  double hit_rate = 0;
  std::int64_t hit_requests = 0, miss_requests = 0;
  LatencySummary ttft_hit, ttft_miss;
};

// Speculative decoding: verify steps (one per decoding sequence per iteration that drafted),
// drafts proposed and accepted, tokens emitted by those steps.
struct SpeculativeStats {
  bool enabled = false;
  std::int64_t steps = 0, proposed = 0, accepted = 0, emitted = 0;
  double acceptance_rate = 0;           // accepted / proposed
  double tokens_per_step = 0;           // emitted / steps
  double expected_tokens_per_step = 0;  // (1 − α^(K+1)) / (1 − α)
};

struct ServingResult {
  LatencySummary ttft, tpot, itl, e2e, scheduling_delay;
  double requests_per_s = 0, output_tokens_per_s = 0, tokens_per_s_per_gpu = 0;
  double goodput_requests_per_s = 0;
  double makespan_s = 0;
  std::int64_t arrived = 0, completed = 0, rejected = 0, preemptions = 0, iterations = 0;
  std::int64_t output_tokens = 0;
  // Preemption by swap: blocks copied to and from the host, and the time those copies took
  // (per GPU, serial with the iterations).
  std::int64_t swapped_out_blocks = 0, swapped_in_blocks = 0;
  double swap_seconds = 0;
  // Little's law: the time-averaged number of requests in the system, against throughput × E2E.
  double mean_in_system = 0;
  std::int64_t peak_in_system = 0;
  std::int64_t warmup_requests = 0;  // closed loop: left out of the latency statistics
  double kv_utilization_mean = 0, kv_utilization_peak = 0;
  PrefixCacheStats prefix_cache;
  SpeculativeStats speculative;
  std::vector<ServingSample> timeline;  // decimated (KV utilisation, requests, batch, tokens)
  KvCapacity capacity;
  std::int64_t gpus = 0;
  // Sorted per-request samples, for CDFs.
  std::vector<double> ttft_samples, tpot_samples, e2e_samples;
  std::vector<std::pair<double, double>> itl_cdf;  // (s, fraction at or below), ≤ 201 points
  // (prompt tokens, TTFT s) of measured requests, every k-th in id order so at most
  // kMaxPromptPoints.
  std::vector<std::pair<std::int64_t, double>> ttft_by_prompt;
  static constexpr std::size_t kMaxPromptPoints = 2000;
  std::vector<IterationRecord> iteration_log;
  std::vector<RequestRecord> request_log;  // finished requests, in id order
  LatencySummary kv_transfer;              // disaggregated: per-request KV transfer time
  double kv_transfer_bytes = 0;
  std::int64_t idle_with_work = 0;  // invariant probe: must stay 0 (work conservation)
  std::vector<std::string> notes;
};

// The GPUs of replica `r`: tp·pp consecutive global ranks, TP innermost.
std::vector<std::int32_t> replica_gpus(const ReplicaShape& shape, std::int64_t r);

ServingResult simulate_serving(const Topology& topo, const ModelSpec& model,
                               const ServingSetup& setup, const std::vector<Request>& requests,
                               CommContext* context = nullptr);

}  // namespace meshsim
