#include "serving/engine.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "serving/serving_sim.hpp"
#include "serving_fixture.hpp"
#include "topology/topology_summary.hpp"

namespace meshsim::test {
namespace {

std::string engine_error(const std::string& text) {
  const Json doc = parse_json_text(text, "e.json");
  try {
    read_engine(JsonRef::root(doc, "e.json"));
  } catch (const Error& e) {
    return e.what();
  }
  return "ok";
}

const char* kValid = R"({"name": "x", "description": "d", "sources": ["s"],
  "scheduler": {"admission": "reserve", "max_seqs": 8, "max_batch_tokens": 512,
                "block_size": 16, "watermark": 0},
  "kv_cache": {"budget": "free_fraction", "fraction": 0.9, "fp8_with_fp8_weights": true},
  "cuda_graphs": {"capture_sizes": [1, 2, 4, 8]}})";

std::string with(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

}  // namespace

TEST_CASE("engine profiles: the bundled ones, and a strict loader") {
  const auto* vllm = bundled_engine("vllm");
  const auto* trt = bundled_engine("trtllm");
  REQUIRE(vllm);
  REQUIRE(trt);
  CHECK(vllm->scheduler.admission == Admission::optimistic);
  CHECK(vllm->scheduler.kv_budget == KvBudget::total_fraction);
  CHECK(vllm->scheduler.max_seqs == 256);
  CHECK(vllm->scheduler.cuda_graph_sizes.size() == 35);  // 1, 2, 4, 8 … 256
  CHECK(vllm->scheduler.cuda_graph_sizes.back() == 256);
  CHECK(trt->scheduler.admission == Admission::reserve);
  CHECK(trt->scheduler.kv_budget == KvBudget::free_fraction);
  CHECK(trt->scheduler.watermark == 0);
  CHECK(default_kv_dtype(*trt, DType::fp8) == DType::fp8);
  CHECK(default_kv_dtype(*trt, DType::bf16) == DType::bf16);
  CHECK(default_kv_dtype(*vllm, DType::fp8) == DType::bf16);
  // The bundled ones are what the files say.
  CHECK(load_engine(source_path("workloads/engines/trtllm.json")).scheduler.block_size ==
        trt->scheduler.block_size);

  CHECK(engine_error(kValid) == "ok");
  CHECK(vllm->scheduler.preemption == Preemption::recompute);
  CHECK(vllm->scheduler.swap_space_bytes == 4.0 * (1ull << 30));
  CHECK(engine_error(
            with(kValid, "\"watermark\": 0}", "\"watermark\": 0, \"preemption\": \"drop\"}")) ==
        "e.json:/scheduler/preemption: 'drop' is not one of recompute, swap");
  CHECK(engine_error(with(kValid, "\"watermark\": 0}", "\"watermark\": 0, \"swap_space_gb\": -1}"))
            .find("e.json:/scheduler/swap_space_gb: ") == 0);
  CHECK_FALSE(vllm->scheduler.prefix_caching);  // v0.6's V0 engine: off unless asked for
  CHECK(engine_error(
            with(kValid, "\"free_fraction\",", "\"free_fraction\", \"prefix_caching\": 1,")) ==
        "e.json:/kv_cache/prefix_caching: expected true or false, found number");
  CHECK(engine_error(with(kValid, "\"reserve\"", "\"lazy\"")) ==
        "e.json:/scheduler/admission: 'lazy' is not one of optimistic, reserve, max_utilization, "
        "ratio");
  CHECK(engine_error(with(kValid, "\"watermark\": 0", "\"watermark\": 0.01")) ==
        "e.json:/scheduler/watermark: must be 0 with reserve admission (the whole request is "
        "reserved; no watermark)");
  CHECK(engine_error(with(kValid, "[1, 2, 4, 8]", "[1, 4, 2]")) ==
        "e.json:/cuda_graphs/capture_sizes/2: capture sizes must increase");
  CHECK(engine_error(with(kValid, "\"fraction\": 0.9", "\"fraction\": 1.5")) ==
        "e.json:/kv_cache/fraction: must be in (0, 1]");
  CHECK(engine_error(with(kValid, "\"free_fraction\"", "\"half\"")) ==
        "e.json:/kv_cache/budget: 'half' is not one of total_fraction, free_fraction, "
        "static_fraction");
  CHECK(engine_error(with(kValid, "\"max_seqs\": 8", "\"max_seqs\": 0")) ==
        "e.json:/scheduler/max_seqs: must be an integer from 1 to 1048576");
  CHECK(engine_error(with(kValid, "\"name\": \"x\",", "\"name\": \"x\", \"speed\": 2,"))
            .find("e.json:/speed: unknown key 'speed'") == 0);
  CHECK(engine_error(with(kValid, "\"sources\": [\"s\"]", "\"sources\": []")).find("/sources") !=
        std::string::npos);
  CHECK(engine_error(with(kValid, "\"cuda_graphs\"",
                          "\"cpu_overhead\": {\"fixed_ms\": -1, \"multi_gpu_extra_ms\": 0, "
                          "\"per_sequence_ms\": 0}, \"cuda_graphs\""))
            .find("e.json:/cpu_overhead/fixed_ms: ") == 0);
  CHECK(engine_error(with(kValid, "\"cuda_graphs\"",
                          "\"cpu_overhead\": {\"fixed_ms\": 1, \"multi_gpu_extra_ms\": 0, "
                          "\"per_sequence_ms\": 0.01}, \"cuda_graphs\"")) == "ok");
  CHECK_THROWS_WITH_AS(
      resolve_engine("no-such-engine"),
      "no-such-engine: is neither a bundled engine (sglang, trtllm, vllm) nor an engine "
      "file that exists",
      Error);
}

TEST_CASE("reserve-at-admission never preempts and never holds more than the KV cache") {
  // 40 blocks of 16 tokens (640 tokens); requests of 200 + 100 tokens (19 blocks each): two fit.
  // Driven by hand: each iteration computes its entries, samples, and finishes what is done.
  SchedulerOptions opt;
  opt.admission = Admission::reserve;
  opt.watermark = 0;
  opt.max_batch_tokens = 256;
  for (const auto admission : {Admission::reserve, Admission::optimistic}) {
    opt.admission = admission;
    ReplicaScheduler s(opt, 40);
    RequestState proto;
    proto.prompt = 200;
    proto.output = 100;
    std::vector<RequestState> reqs(6, proto);
    for (std::int32_t i = 0; i < 6; ++i) s.enqueue(i);
    std::int64_t preempted = 0, done = 0;
    for (int step = 0; step < 10000 && done < 6; ++step) {
      const auto b = s.form_batch(reqs);
      preempted += b.preempted;
      if (admission == Admission::reserve) {
        // Every admitted request holds the blocks of its whole prompt + output.
        std::int64_t held = 0;
        for (auto id : s.running()) {
          CHECK(reqs[static_cast<std::size_t>(id)].blocks == 19);
          held += 19;
        }
        CHECK(held <= 40);
        CHECK(s.running().size() <= 2);
      }
      done += complete_by_hand(s, reqs, b);
    }
    CHECK(done == 6);
    if (admission == Admission::reserve)
      CHECK(preempted == 0);
    else
      CHECK(preempted > 0);  // optimistic admission over-commits the same cache
  }
}

TEST_CASE("KV capacity: the engine's budget, and FP8 KV holds twice the tokens of BF16") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  ServingSetup s;
  const auto bf16 = kv_capacity(topo, model, s);
  s.shape.kv_dtype = DType::fp8;
  const auto fp8 = kv_capacity(topo, model, s);
  CHECK(fp8.kv_bytes_per_token_rank == doctest::Approx(bf16.kv_bytes_per_token_rank / 2));
  CHECK(std::abs(fp8.blocks - 2 * bf16.blocks) <= 1);
  // vLLM: 0.9 × HBM − everything else. TensorRT-LLM: 0.9 × (HBM − everything else).
  const double hbm = topo.gpu.hbm_bytes.as_double();
  auto blocks = [&](double room, const KvCapacity& c) {
    return static_cast<std::int64_t>(std::floor(std::floor(room / c.kv_bytes_per_token_rank) /
                                                static_cast<double>(c.block_size)));
  };
  CHECK(fp8.blocks == blocks(0.9 * hbm - fp8.memory.total(), fp8));
  s.scheduler = bundled_engine("trtllm")->scheduler;
  const auto trt = kv_capacity(topo, model, s);
  CHECK(trt.block_size == 64);
  CHECK(trt.blocks == blocks(0.9 * (hbm - trt.memory.total()), trt));
  CHECK(trt.tokens() > fp8.tokens());  // 0.9 of what is free is more than 0.9 of all minus it
}

TEST_CASE("CUDA-graph decode: a batch of 5 costs the captured size 8 in its dense parts") {
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", {});
  BatchShape five;
  five.decodes = 5;
  five.decode_context = 5 * 1024;
  five.sampled = 5;
  const double eager = f.cost->stage_seconds(0, five);
  f.cost->set_cuda_graph_sizes({1, 2, 4, 8, 16});
  CHECK(f.cost->padded_tokens(five) == 8);
  const double graph = f.cost->stage_seconds(0, five);
  // 32 layers, TP 1 (no all-reduce): only the dense layer time changes, from 5 to 8 tokens.
  CHECK(graph - eager == doctest::Approx(32 * (f.cost->layer_dense_seconds(0, 8) -
                                               f.cost->layer_dense_seconds(0, 5))));
  CHECK(graph > eager);
  // Above the largest captured size, and with a prefill in the batch, nothing is padded.
  five.decodes = 17;
  CHECK(f.cost->padded_tokens(five) == 17);
  five.decodes = 5;
  five.prefill.push_back(PrefillChunk{3, 0});
  CHECK(f.cost->padded_tokens(five) == 8);  // 5 + 3 tokens: no graph, not padded
  five.prefill.back().tokens = 2;
  CHECK(f.cost->padded_tokens(five) == 7);
}

TEST_CASE("vllm's host work: every iteration adds 0.814 ms + 0.0426 ms per sequence") {
  // One request at a time on one GPU: TTFT is the prefill plus one iteration's host work for one
  // sequence; TPOT each decode step plus the same (batch 1 is a captured graph size: no padding).
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  ServingSetup s;
  s.scheduler = bundled_engine("vllm")->scheduler;
  const double host = 0.814e-3 + 0.0426e-3;
  CHECK(s.scheduler.cpu_seconds(1, 1) == doctest::Approx(host));
  CHECK(s.scheduler.cpu_seconds(256, 8) == doctest::Approx(0.814e-3 + 0.579e-3 + 256 * 0.0426e-3));
  const auto r =
      simulate_serving(topo, model, s, make_requests("0.001", 3, "fixed:1024", "fixed:16"));
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", {});
  const auto at = [](double x) { return Time::from_seconds_ceil(x).seconds(); };
  CHECK(r.ttft.p50 ==
        doctest::Approx(at(f.cost->stage_seconds(0, one_prefill(1024)) + host)).epsilon(1e-9));
  double decode = 0;
  for (std::int64_t j = 1; j < 16; ++j)
    decode += at(f.cost->stage_seconds(0, one_decode(1024 + j)) + host);
  CHECK(r.tpot.mean == doctest::Approx(decode / 15).epsilon(1e-9));
}

TEST_CASE("serving on the trtllm profile: no preemption under a KV cache that vLLM overcommits") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  TrafficSpec t;
  t.arrival = arrival_from_rate("inf", 1, "--rate");
  t.prompt = parse_length_dist("uniform:256,1536", "", "--prompt");
  t.output = parse_length_dist("uniform:64,768", "", "--output");
  t.requests = 96;
  t.seed = 5;
  const auto reqs = generate_requests(t);
  ServingSetup s;
  s.check_invariants = true;
  s.scheduler = bundled_engine("trtllm")->scheduler;
  s.scheduler.kv_budget = KvBudget::total_fraction;
  s.scheduler.gpu_memory_utilization = 0.22;  // ~0.6 GB of KV, as the preemption test uses
  const auto trt = simulate_serving(topo, model, s, reqs);
  CHECK(trt.completed == 96);
  CHECK(trt.preemptions == 0);
  s.scheduler.admission = Admission::optimistic;
  const auto opt = simulate_serving(topo, model, s, reqs);
  CHECK(opt.completed == 96);
  CHECK(opt.preemptions > 0);
}

TEST_CASE("preemption by swap keeps a sequence's computed tokens and resumes it before new work") {
  // 20 blocks of 16 tokens; two requests of 150 + 60 tokens (14 blocks each at the end) cannot
  // both grow: the later one is preempted.
  SchedulerOptions opt;
  opt.watermark = 0;
  opt.max_batch_tokens = 512;
  opt.preemption = Preemption::swap;
  opt.swap_blocks = 100;
  RequestState proto;
  proto.prompt = 150;
  proto.output = 60;
  for (const std::int64_t swap_blocks : {100, 0}) {
    opt.swap_blocks = swap_blocks;
    ReplicaScheduler s(opt, 20);
    std::vector<RequestState> reqs(3, proto);
    for (std::int32_t i = 0; i < 3; ++i) s.enqueue(i);
    std::int64_t out = 0, in = 0, recomputed = 0, done = 0, swapped_seen = 0;
    for (int step = 0; step < 10000 && done < 3; ++step) {
      const auto waiting_before = s.waiting().size();
      const auto b = s.form_batch(reqs);
      // Nothing new is admitted while a sequence waits on the host.
      if (!s.swapped().empty()) CHECK(s.waiting().size() == waiting_before);
      out += b.swapped_out_blocks;
      in += b.swapped_in_blocks;
      recomputed += b.recomputed_tokens;
      for (const auto id : s.swapped()) {
        const auto& r = reqs[static_cast<std::size_t>(id)];
        ++swapped_seen;
        CHECK(r.blocks == 0);
        CHECK(r.computed > 0);  // its KV lives on the host
        CHECK(r.swapped_blocks >= s.pool().blocks_for(r.computed));
      }
      done += complete_by_hand(s, reqs, b);
      CHECK(s.swap_used() <= swap_blocks);
    }
    CHECK(done == 3);
    if (swap_blocks > 0) {
      CHECK(swapped_seen > 0);
      CHECK(out > 0);
      CHECK(in == out);
      CHECK(recomputed == 0);
    } else {
      CHECK(out == 0);  // no room on the host: recompute
      CHECK(recomputed > 0);
    }
    CHECK(s.swap_used() == 0);
  }
}

TEST_CASE("swap in a simulation: blocks conserved, copies priced over the host link by hand") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  const auto reqs = make_requests("inf", 96, "uniform:256,1536", "uniform:64,768", 5);
  ServingSetup s;
  s.check_invariants = true;
  s.scheduler.gpu_memory_utilization = 0.22;
  s.scheduler.preemption = Preemption::swap;
  const auto r = simulate_serving(topo, model, s, reqs);
  CHECK(r.completed == 96);
  CHECK(r.preemptions > 0);
  CHECK(r.swapped_out_blocks > 0);
  CHECK(r.swapped_in_blocks == r.swapped_out_blocks);
  CHECK(r.idle_with_work == 0);
  const double block = r.capacity.kv_bytes_per_token_rank * 16;
  CHECK(r.swap_seconds == doctest::Approx(2.0 * static_cast<double>(r.swapped_out_blocks) * block /
                                          summarize(topo, false).pcie_Bps));
}

}  // namespace meshsim::test
