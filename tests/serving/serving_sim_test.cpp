#include "serving/serving_sim.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "core/error.hpp"
#include "memory/memory_model.hpp"
#include "serving_fixture.hpp"

namespace meshsim::test {
namespace {

std::vector<Request> traffic(const std::string& rate, std::int64_t n, const std::string& prompt,
                             const std::string& output, std::uint64_t seed = 1) {
  return make_requests(rate, n, prompt, output, seed);
}

struct Run {
  Run(const std::string& topology, const std::string& model_file)
      : topo(load_topology(topology_path(topology))),
        model(load_model(source_path("workloads/models/" + model_file))) {}
  ServingResult operator()(const ServingSetup& s, const std::vector<Request>& reqs) const {
    return simulate_serving(topo, model, s, reqs);
  }
  Topology topo;
  ModelSpec model;
};

void check_littles_law(const ServingResult& r) {
  // L = λ·W over the run: the time-averaged requests in the system equal throughput × mean E2E.
  CHECK(r.mean_in_system == doctest::Approx(r.requests_per_s * r.e2e.mean).epsilon(1e-6));
}

}  // namespace

TEST_CASE("serving at a very low rate: TTFT is one prefill, TPOT one batch-1 decode step") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  ServingSetup s;
  s.check_invariants = true;
  const auto reqs = traffic("0.001", 3, "fixed:1024", "fixed:16");
  const auto r = run(s, reqs);
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  const double prefill =
      Time::from_seconds_ceil(f.cost->stage_seconds(0, one_prefill(1024))).seconds();
  CHECK(r.ttft.p50 == doctest::Approx(prefill).epsilon(1e-9));
  CHECK(r.ttft.p99 == doctest::Approx(prefill).epsilon(1e-9));
  double decode = 0;
  for (std::int64_t j = 1; j < 16; ++j)
    decode += Time::from_seconds_ceil(f.cost->stage_seconds(0, one_decode(1024 + j))).seconds();
  CHECK(r.tpot.mean == doctest::Approx(decode / 15).epsilon(1e-9));
  CHECK(r.scheduling_delay.p99 == 0);
  CHECK(r.completed == 3);
  CHECK(r.preemptions == 0);
  CHECK(r.idle_with_work == 0);
  check_littles_law(r);
}

TEST_CASE("serving conserves requests and KV blocks under preemption, PP and disaggregation") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  const auto reqs = traffic("inf", 96, "uniform:256,1536", "uniform:64,768", 5);
  ServingSetup tight;
  tight.check_invariants = true;  // throws on the first event that breaks a conservation law
  // 22 % of 80 GB leaves ~0.6 GB of KV cache (4,704 tokens) for 96 sequences of up to 2.3K.
  tight.scheduler.gpu_memory_utilization = 0.22;
  SUBCASE("preemption by recompute") {
    const auto r = run(tight, reqs);
    MESSAGE("KV tokens per replica: ", r.capacity.tokens(), ", preemptions: ", r.preemptions);
    CHECK(r.preemptions > 0);
    CHECK(r.completed == 96);
    CHECK(r.kv_utilization_peak <= 1.0);
    CHECK(r.kv_utilization_peak > 0.9);
    CHECK(r.idle_with_work == 0);
    check_littles_law(r);
    // The report's time series: in time order, never more running than the replica's sequence
    // limit, everything served at the end; one TTFT-against-prompt point per request (96 <
    // kMaxPromptPoints).
    REQUIRE(!r.timeline.empty());
    for (std::size_t i = 1; i < r.timeline.size(); ++i)
      CHECK(r.timeline[i].t_s >= r.timeline[i - 1].t_s);
    std::int64_t most_waiting = 0;
    for (const auto& x : r.timeline) {
      CHECK(x.running <= tight.scheduler.max_seqs);
      CHECK(x.batch_sequences <= static_cast<double>(x.running));
      most_waiting = std::max(most_waiting, x.waiting);
    }
    CHECK(most_waiting > 0);  // 96 at once into ~4.7K tokens of KV: some wait
    CHECK(r.timeline.back().running == 0);
    CHECK(r.timeline.back().waiting == 0);
    CHECK(r.timeline.back().output_tokens == r.output_tokens);
    CHECK(r.ttft_by_prompt.size() == 96);
  }
  SUBCASE("pipeline stages as their own resources") {
    tight.shape.pp = 2;
    tight.replicas = 2;
    tight.record_iterations = true;
    const auto r = run(tight, reqs);
    CHECK(r.completed == 96);
    CHECK(r.idle_with_work == 0);
    // Both stages of both replicas ran; stage 1 of a batch starts after its stage 0 ends.
    std::set<std::pair<int, int>> lanes;
    for (const auto& it : r.iteration_log) lanes.insert({it.replica, it.stage});
    CHECK(lanes.size() == 4);
    CHECK(r.iterations * 2 == static_cast<std::int64_t>(r.iteration_log.size()));
  }
  SUBCASE("disaggregated prefill and decode") {
    tight.prefill_replicas = 1;
    tight.decode_replicas = 2;
    const auto r = run(tight, reqs);
    CHECK(r.completed == 96);
    CHECK(r.kv_transfer.count >= 96);
    CHECK(r.idle_with_work == 0);
  }
}

TEST_CASE("disaggregated serving moves each prompt's KV cache over the links") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  ServingSetup s;
  s.shape.tp = 2;
  s.prefill_replicas = 1;
  s.decode_replicas = 3;
  s.check_invariants = true;
  const auto reqs = traffic("0.001", 4, "fixed:2048", "fixed:32");
  const auto r = run(s, reqs);
  CHECK(r.completed == 4);
  // Every prompt token's KV (all layers, both TP halves) moves once.
  CHECK(r.kv_transfer_bytes ==
        doctest::Approx(4 * 2048 * kv_bytes_per_token(run.model, DType::bf16)));
  // 2048 tokens × 64 KiB = 128 MiB per request split over two NVLink pairs.
  CHECK(r.kv_transfer.mean > 64.0 * 1024 * 1024 / 450e9);
  CHECK(r.kv_transfer.mean < 1e-2);
  // TTFT is still the prefill alone; the transfer delays the second token.
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{.tp = 2});
  CHECK(r.ttft.p50 == doctest::Approx(f.cost->stage_seconds(0, one_prefill(2048))).epsilon(1e-6));
  CHECK(r.gpus == 8);
  check_littles_law(r);
}

TEST_CASE("serving runs are byte-identical and the router spreads requests") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  ServingSetup s;
  s.shape.tp = 2;
  s.replicas = 4;
  s.router = RouterPolicy::round_robin;
  s.record_iterations = true;
  const auto reqs = traffic("20", 300, "uniform:100,2000", "uniform:10,300", 9);
  const auto a = run(s, reqs);
  const auto b = run(s, reqs);
  CHECK(a.ttft_samples == b.ttft_samples);
  CHECK(a.e2e_samples == b.e2e_samples);
  CHECK(a.iterations == b.iterations);
  CHECK(a.itl.p99 == b.itl.p99);
  std::set<int> used;
  for (const auto& it : a.iteration_log) used.insert(it.replica);
  CHECK(used.size() == 4);
  for (auto policy : {RouterPolicy::least_outstanding, RouterPolicy::jsq_tokens}) {
    s.router = policy;
    const auto r = run(s, reqs);
    CHECK(r.completed == 300);
    check_littles_law(r);
  }
}

TEST_CASE("serving refuses what cannot run, with the reason") {
  Run big("dgx-h100.json", "llama3.1-405b.json");
  ServingSetup s;
  const auto reqs = traffic("1", 2, "fixed:10", "fixed:10");
  CHECK_THROWS_WITH_AS(big(s, reqs), doctest::Contains("does not fit tp=1"), Error);
  Run small("dgx-h100.json", "llama3.1-8b.json");
  s.shape.tp = 4;
  s.replicas = 3;
  CHECK_THROWS_WITH_AS(small(s, reqs), doctest::Contains("need 12 GPUs"), Error);
  // A request longer than the replica's KV cache is rejected, not left to hang.
  ServingSetup tiny;
  tiny.scheduler.gpu_memory_utilization = 0.22;
  std::vector<Request> long_one = traffic("1", 2, "fixed:100", "fixed:10");
  long_one[1].prompt_tokens = 100000;
  const auto r = small(tiny, long_one);
  CHECK(r.rejected == 1);
  CHECK(r.completed == 1);
  CHECK(r.notes.size() == 1);
}

TEST_CASE("offline serving reaches a throughput bound by decode batching") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  ServingSetup s;
  const auto reqs = traffic("inf", 512, "fixed:512", "fixed:128");
  const auto r = run(s, reqs);
  CHECK(r.completed == 512);
  CHECK(r.scheduling_delay.p99 > 0);  // 512 requests, 256 sequence slots
  // 256 decodes per iteration at most: output tokens/s below 256 / (batch-1 step).
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  CHECK(r.output_tokens_per_s < 256 / f.cost->stage_seconds(0, one_decode(512)));
  CHECK(r.output_tokens_per_s > 1000);
  check_littles_law(r);
}

}  // namespace meshsim::test

namespace meshsim::test {

TEST_CASE("closed loop: C clients with no think time keep exactly C requests in the system") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  ServingSetup s;
  s.check_invariants = true;
  s.clients = 8;
  // Arrival times of the generated requests are ignored: only their lengths are used.
  const auto reqs = traffic("3", 300, "lognormal:512,0.6", "lognormal:64,0.5");
  const auto r = run(s, reqs);
  CHECK(r.completed == 300);
  CHECK(r.peak_in_system == 8);
  CHECK(r.warmup_requests == 8);
  CHECK(r.ttft_samples.size() == 300 - 8);
  // Every completion is replaced at once until the requests run out, then the loop drains:
  // the time average sits just under C.
  CHECK(r.mean_in_system <= 8.0);
  CHECK(r.mean_in_system > 7.0);
  // Little's law over the run (the warm-up's E2E is left out of the mean, hence the tolerance).
  CHECK(r.mean_in_system == doctest::Approx(r.requests_per_s * r.e2e.mean).epsilon(0.05));
  CHECK(r.idle_with_work == 0);
}

TEST_CASE("closed loop: think time lowers the load; exponential think times are seeded") {
  Run run("dgx-h100.json", "llama3.1-8b.json");
  const auto reqs = traffic("inf", 200, "fixed:256", "fixed:32");
  ServingSetup s;
  s.clients = 4;
  s.think_time_s = 0.5;
  const auto r = run(s, reqs);
  // Each client cycles E2E + think: throughput ≈ C / (E2E + think), and fewer are in the
  // system than clients (each spends `think` outside it).
  CHECK(r.requests_per_s == doctest::Approx(4.0 / (r.e2e.mean + 0.5)).epsilon(0.05));
  CHECK(r.mean_in_system < 4.0 * r.e2e.mean / (r.e2e.mean + 0.5) * 1.05);
  CHECK(r.peak_in_system <= 4);
  s.think_exponential = true;
  const auto a = run(s, reqs), b = run(s, reqs);
  CHECK(a.makespan_s == b.makespan_s);
  CHECK(a.ttft.mean == b.ttft.mean);
  s.think_seed = 99;
  CHECK(run(s, reqs).makespan_s != a.makespan_s);
}

}  // namespace meshsim::test
