// The admission policies beyond vLLM's and TensorRT-LLM's default: TensorRT-LLM's
// MAX_UTILIZATION and SGLang's new-token-ratio admission with unmixed batches, and SGLang's
// static KV pool.
#include <doctest/doctest.h>

#include <cmath>

#include "serving/engine.hpp"
#include "serving/serving_sim.hpp"
#include "serving_fixture.hpp"

namespace meshsim::test {
namespace {

// Ratio admission on a pool of one-token blocks (SGLang's page size 1), so blocks are tokens.
SchedulerOptions ratio_options() {
  SchedulerOptions opt;
  opt.admission = Admission::ratio;
  opt.mixed_batches = false;
  opt.watermark = 0;
  opt.block_size = 1;
  opt.max_batch_tokens = 1000;
  opt.ratio = RatioAdmission{
      .init = 0.5, .min = 0.1, .decay_steps = 4, .retract_steps = 2, .clip_tokens = 4096};
  return opt;
}

std::vector<RequestState> requests_of(std::size_t n, std::int64_t prompt, std::int64_t output) {
  RequestState proto;
  proto.prompt = prompt;
  proto.output = output;
  return std::vector<RequestState>(n, proto);
}

std::int64_t ceil_of(double x) {
  return static_cast<std::int64_t>(std::ceil(x));
}

}  // namespace

TEST_CASE("max_utilization admits as optimistic with no watermark and pauses the latest started") {
  // The same over-committed cache as the reserve test (40 blocks, 200 + 100 tokens each):
  // MAX_UTILIZATION forms exactly the batches of optimistic admission without a watermark, and
  // pauses (preempts) where reserve-at-admission never would.
  SchedulerOptions opt;
  opt.watermark = 0;
  opt.max_batch_tokens = 256;
  std::vector<std::vector<std::int64_t>> batches[2];
  std::int64_t preempted[2] = {0, 0};
  const Admission policies[2] = {Admission::max_utilization, Admission::optimistic};
  for (int k = 0; k < 2; ++k) {
    opt.admission = policies[k];
    ReplicaScheduler s(opt, 40);
    auto reqs = requests_of(6, 200, 100);
    for (std::int32_t i = 0; i < 6; ++i) s.enqueue(i);
    std::int64_t done = 0;
    for (int step = 0; step < 10000 && done < 6; ++step) {
      const auto b = s.form_batch(reqs);
      preempted[k] += b.preempted;
      std::vector<std::int64_t> entries;
      for (const auto& e : b.entries) entries.push_back(e.request * 100000 + e.tokens);
      batches[k].push_back(entries);
      done += complete_by_hand(s, reqs, b);
    }
    CHECK(done == 6);
  }
  CHECK(preempted[0] > 0);
  CHECK(preempted[0] == preempted[1]);
  CHECK(batches[0] == batches[1]);
}

TEST_CASE("ratio admission: the free KV covers each prompt plus the ratio of remaining outputs") {
  // 100 one-token blocks; prompts of 20, outputs of 40; ratio 0.5 at first.
  ReplicaScheduler s(ratio_options(), 100);
  auto reqs = requests_of(3, 20, 40);
  for (std::int32_t i = 0; i < 3; ++i) s.enqueue(i);
  // The first takes 20 and expects ⌈0.5 × 40⌉ = 20 more; the second fits in 100 − 40 − 20 = 40
  // with its own 20 + 20; the third would leave 40 − 40 − 40 < 0.
  const auto first = step_by_hand(s, reqs);
  CHECK(first.entries.size() == 2);
  CHECK(first.shape.decodes == 0);
  CHECK(s.waiting().size() == 1);
  CHECK(s.new_token_ratio() == doctest::Approx(0.5));  // a prefill batch does not decay it
  // Then decode batches while the third does not fit, the ratio falling by (0.5 − 0.1) / 4 per
  // decode batch to 0.1; the third is admitted (alone, unmixed) at the first batch where, by
  // hand, 100 − held − 20 ≥ Σ ⌈ratio × remaining⌉ + ⌈ratio × 40⌉.
  double ratio = 0.5;
  bool admitted = false;
  for (int step = 0; step < 60 && !admitted; ++step) {
    std::int64_t held = 0, expected = 0;
    for (const auto id : s.running()) {
      const auto& r = reqs[static_cast<std::size_t>(id)];
      held += r.blocks;
      expected += ceil_of(ratio * static_cast<double>(r.output - r.generated));
    }
    const bool fits = 100 - held - 20 - expected - ceil_of(ratio * 40.0) >= 0;
    const auto b = step_by_hand(s, reqs);
    if (fits) {
      REQUIRE(b.entries.size() == 1);
      CHECK(b.entries[0].request == 2);
      CHECK(b.shape.decodes == 0);
      admitted = true;
    } else {
      CHECK(b.shape.prefill.empty());
      CHECK(b.shape.decodes == static_cast<std::int64_t>(s.running().size()));
      ratio = std::max(0.1, ratio - 0.1);
      CHECK(s.new_token_ratio() == doctest::Approx(ratio));
    }
  }
  CHECK(admitted);
}

TEST_CASE("ratio admission: a retraction sets the ratio from what the survivors decoded") {
  // 50 one-token blocks; ratio 0.1 admits both 20 + 40-token requests (20 + 4, then 20 + 4 in
  // the 30 left); at 25 tokens each the cache is full, the later one is retracted while the
  // first has generated 6 tokens: ratio (6 + 2 × 1) / 40 = 0.2.
  auto opt = ratio_options();
  opt.ratio.init = 0.1;
  ReplicaScheduler s(opt, 50);
  auto reqs = requests_of(2, 20, 40);
  s.enqueue(0);
  s.enqueue(1);
  CHECK(step_by_hand(s, reqs).entries.size() == 2);
  std::int64_t step = 0;
  for (; step < 10; ++step) {
    const auto b = step_by_hand(s, reqs);
    if (b.preempted > 0) {
      CHECK(b.preempted == 1);
      CHECK(s.running().size() == 1);
      CHECK(s.running()[0] == 0);
      CHECK(reqs[0].generated == 7);  // 6 before this batch, 1 from it
      CHECK(s.new_token_ratio() == doctest::Approx(8.0 / 40.0));
      break;
    }
  }
  CHECK(step == 5);  // decodes 1 … 5 fill 40 → 50 tokens
}

TEST_CASE("unmixed batches: prefills run alone whenever one can, decodes otherwise") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  ServingSetup s;
  s.check_invariants = true;
  s.scheduler = ratio_options();
  s.scheduler.max_batch_tokens = 2048;
  s.scheduler.gpu_memory_utilization = 0.22;  // ~0.6 GB of KV: retractions happen
  s.scheduler.kv_budget = KvBudget::total_fraction;
  const auto reqs = make_requests("inf", 96, "uniform:256,1536", "uniform:64,768", 5);
  const auto r = simulate_serving(topo, model, s, reqs);
  CHECK(r.completed == 96);
  CHECK(r.idle_with_work == 0);
  CHECK(r.preemptions > 0);
  // Hand-driven: no batch holds both a prefill chunk and a decode.
  ReplicaScheduler sched(s.scheduler, 2000);
  auto hand = requests_of(8, 300, 50);
  for (std::int32_t i = 0; i < 8; ++i) sched.enqueue(i);
  std::int64_t done = 0, prefill_batches = 0, decode_batches = 0;
  for (int step = 0; step < 10000 && done < 8; ++step) {
    const auto b = sched.form_batch(hand);
    CHECK((b.shape.prefill.empty() || b.shape.decodes == 0));
    prefill_batches += b.shape.prefill.empty() ? 0 : 1;
    decode_batches += b.shape.decodes > 0 ? 1 : 0;
    done += complete_by_hand(sched, hand, b);
  }
  CHECK(done == 8);
  CHECK(prefill_batches > 0);
  CHECK(decode_batches > 0);
}

TEST_CASE("sglang profile: a static KV pool of mem_fraction_static by TP, less the weights") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  const auto* sg = bundled_engine("sglang");
  REQUIRE(sg);
  CHECK(sg->scheduler.admission == Admission::ratio);
  CHECK_FALSE(sg->scheduler.mixed_batches);
  CHECK(sg->scheduler.block_size == 1);
  CHECK(sg->scheduler.prefix_caching);
  CHECK(sg->scheduler.ratio.min == doctest::Approx(0.7 * 0.14));
  CHECK(sg->scheduler.memory_fraction(1) == 0.88);
  CHECK(sg->scheduler.memory_fraction(2) == 0.87);
  CHECK(sg->scheduler.memory_fraction(4) == 0.85);
  CHECK(sg->scheduler.memory_fraction(8) == 0.81);
  CHECK(sg->scheduler.memory_fraction(32) == 0.79);
  const double hbm = topo.gpu.hbm_bytes.as_double();
  for (const std::int32_t tp : {1, 8}) {
    ServingSetup s;
    s.scheduler = sg->scheduler;
    s.shape.tp = tp;
    const auto c = kv_capacity(topo, model, s);
    CHECK(c.block_size == 1);
    const double f = tp == 1 ? 0.88 : 0.81;
    CHECK(c.blocks == static_cast<std::int64_t>(
                          std::floor((f * hbm - c.memory.weights) / c.kv_bytes_per_token_rank)));
  }
  // Served end to end: every request completes, work is conserved, the ratio admission holds.
  ServingSetup s;
  s.check_invariants = true;
  s.scheduler = sg->scheduler;
  const auto r = simulate_serving(topo, model, s,
                                  make_requests("20", 400, "uniform:256,1536", "uniform:64,512", 3,
                                                PrefixShare{.groups = 4, .tokens = 128}));
  CHECK(r.completed == 400);
  CHECK(r.idle_with_work == 0);
}

TEST_CASE("engine files: ratio admission, fraction_by_tp and mixed_batches are read strictly") {
  const std::string base = R"({"name": "x", "description": "d", "sources": ["s"],
  "scheduler": {"admission": "ratio", "max_seqs": 8, "max_batch_tokens": 512,
                "block_size": 1, "watermark": 0, "mixed_batches": false, RATIO},
  "kv_cache": {"budget": "static_fraction", "fraction": 0.9, TABLE "fp8_with_fp8_weights": false},
  "cuda_graphs": {"capture_sizes": []}})";
  const std::string ratio =
      R"("new_token_ratio": {"init": 0.7, "min": 0.1, "decay_steps": 600, "retract_steps": 20,
      "clip_tokens": 4096})";
  const auto error = [&](std::string r, std::string table) {
    std::string text = base;
    text.replace(text.find("RATIO"), 5, r);
    text.replace(text.find("TABLE"), 5, table);
    const Json doc = parse_json_text(text, "e.json");
    try {
      const auto e = read_engine(JsonRef::root(doc, "e.json"));
      CHECK(e.scheduler.admission == Admission::ratio);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("ok");
  };
  CHECK(error(ratio, "") == "ok");
  CHECK(error(ratio, R"("fraction_by_tp": [[1, 0.9], [4, 0.8]],)") == "ok");
  CHECK(error(R"("preemption": "recompute")", "") ==
        "e.json:/scheduler: missing required field 'new_token_ratio'");
  CHECK(error(ratio, R"("fraction_by_tp": [[2, 0.9]],)") ==
        "e.json:/kv_cache/fraction_by_tp/0/0: the first entry must be for TP 1");
  CHECK(error(ratio, R"("fraction_by_tp": [[1, 0.9], [1, 0.8]],)") ==
        "e.json:/kv_cache/fraction_by_tp/1/0: TP degrees must increase");
  CHECK(error(ratio, R"("fraction_by_tp": [[1, 1.5]],)") ==
        "e.json:/kv_cache/fraction_by_tp/0/1: must be in (0, 1]");
  CHECK(error(ratio, R"("fraction_by_tp": [[1]],)") ==
        "e.json:/kv_cache/fraction_by_tp/0: expected [smallest TP, fraction]");
  std::string low = ratio;
  low.replace(low.find("\"min\": 0.1"), 10, "\"min\": 0.9");
  CHECK(error(low, "") == "e.json:/scheduler/new_token_ratio/min: must not exceed init");
  // The ratio's parameters belong to ratio admission only.
  std::string optimistic = base;
  optimistic.replace(optimistic.find("\"ratio\""), 7, "\"optimistic\"");
  optimistic.replace(optimistic.find("RATIO"), 5, ratio);
  optimistic.replace(optimistic.find("TABLE"), 5, "");
  const Json doc = parse_json_text(optimistic, "e.json");
  CHECK_THROWS_WITH_AS(read_engine(JsonRef::root(doc, "e.json")),
                       "e.json:/scheduler/new_token_ratio: only applies to ratio admission", Error);
  CHECK(admission_flag("max_utilization") == Admission::max_utilization);
  CHECK_THROWS_WITH_AS(admission_flag("greedy"),
                       "--admission: 'greedy' is not one of optimistic, reserve, max_utilization, "
                       "ratio",
                       Error);
}

}  // namespace meshsim::test
