#include "report/training_report.hpp"

#include <doctest/doctest.h>

#include "report/metrics_json.hpp"
#include "report/serving_report.hpp"

using namespace meshsim;

namespace {

// A hand-built step: 2 s, 0.5 s of it exposed DP communication (0.2 s of that a reduce-scatter),
// on a GPU with 80 GB; memory 30 + 20 GB.
TrainingResult step() {
  TrainingResult r;
  r.step_time_s = 2.0;
  r.tokens_per_s = 1000;
  r.tokens_per_s_per_gpu = 125;
  r.model_tflops_per_gpu = 400;
  r.mfu = 0.4;
  r.hfu = 0.5;
  r.compute_s = 1.5;
  r.gpus = 8;
  r.stack = "megatron";
  r.microbatches = 4;
  r.chunk_layers = {16, 16};
  r.simulated_ranks = 2;
  r.ops = 1234;
  r.exposed_comm_s = {{"dp", 0.5}};
  r.exposed_comm_by_op_s = {{"all_gather", 0.3}, {"reduce_scatter", 0.2}};
  r.comm_bytes_per_gpu = {{"dp", 4e9}};
  r.memory.weights = 30e9;
  r.memory.optimizer = 20e9;
  r.memory.stage = 1;
  r.reliability.checkpoint_s = 2;
  r.reliability.checkpoint_interval_s = 600;
  r.reliability.goodput_fraction = 0.99;
  RankBreakdown b;
  b.rank = 4;
  b.stage = 1;
  b.compute_s = 1.5;
  b.exposed_s = {{"dp", 0.3}, {"tp", 0.2}};
  r.ranks = {b};
  return r;
}

TrainingRun run_of(const TrainingSetup& setup, double gpu_bytes) {
  TrainingRun run;
  run.model = "m";
  run.cluster = "c";
  run.gpu = "G";
  run.kernel_model = "k";
  run.setup = &setup;
  run.gpu_bytes = gpu_bytes;
  return run;
}

}  // namespace

TEST_CASE("training text: one value column, a label as long as the column keeps a space") {
  TrainingSetup setup;
  setup.job = {4096, 32, 1, DType::bf16, true};
  setup.config.mesh = {4, 1, 2, 1, 1, 0};
  const auto text = training_text(step(), run_of(setup, 80e9));
  CHECK(text.find("# meshsim train: m on c (8 × G)\n# kernel model: k\n") == 0);
  CHECK(text.find("step time             2.0000 s\n") != std::string::npos);
  CHECK(text.find("compute               1.5000 s (75.0%)\n") != std::string::npos);
  CHECK(text.find("exposed comm dp       0.5000 s (25.0%), 4.00 GB sent per GPU\n") !=
        std::string::npos);
  CHECK(text.find("  by op all_gather    0.3000 s\n") != std::string::npos);
  // 22 characters: before, the value ran into it ("reduce_scatter0.2000").
  CHECK(text.find("  by op reduce_scatter 0.2000 s\n") != std::string::npos);
  CHECK(text.find("peak memory           50.00 GB of 80.00 (stage 1, fits)\n") !=
        std::string::npos);
  CHECK(text.find("  rank     4 stage   1: 1.5000 / 0.5000 (mostly dp) / 0.0000 s\n") !=
        std::string::npos);
}

TEST_CASE("training JSON: the step's keys with the run's layout and the memory verdict") {
  TrainingSetup setup;
  setup.job = {4096, 32, 2, DType::bf16, true};
  setup.config.mesh = {4, 1, 2, 1, 1, 0};
  setup.config.zero = 1;
  const auto j = training_run_json(step(), run_of(setup, 40e9));
  CHECK(j["step_time_s"] == 2.0);
  CHECK(j["mesh"]["dp"] == 4);
  CHECK(j["mesh"]["fsdp"] == 4);  // no HSDP: the whole DP group
  CHECK(j["mbs"] == 2);
  CHECK(j["gbs"] == 32);
  CHECK(j["memory"]["total"] == 50e9);
  CHECK(j["memory"]["fits"] == false);
  CHECK(j["exposed_comm_by_op_s"]["reduce_scatter"] == 0.2);
  CHECK(j["ranks"][0]["exposed_comm_s"]["tp"] == 0.2);
}

TEST_CASE("a layout that does not fit: memory by category and how far over, no step time") {
  TrainingSetup setup;
  setup.config.mesh = {8, 1, 1, 1, 1, 0};
  const auto r = step();
  const auto run = run_of(setup, 40e9);
  CHECK_FALSE(fits_memory(r, run));
  const auto text = does_not_fit_text(r, run);
  CHECK(text.find("weights               30.00 GB\n") != std::string::npos);
  CHECK(text.find("peak memory           50.00 GB of 40.00 (stage 1)\n") != std::string::npos);
  CHECK(text.find("step time") == std::string::npos);
  // 50 GB needed, 10 GB over the GPU's 40.
  CHECK(does_not_fit_verdict(r, run).find(
            "stage 1 needs 50.00 GB per GPU, 10.00 GB over the GPU's 40.00") != std::string::npos);
  const auto j = does_not_fit_json(r, run);
  CHECK(j["fits"] == false);
  CHECK(j["memory"]["over_bytes"] == 10e9);
  CHECK_FALSE(j.contains("step_time_s"));
}

TEST_CASE("serving summary: latency table in s and ms, throughput, KV cache line") {
  ServingResult r;
  r.ttft = {0.5, 0.4, 0.8, 1.2};
  r.tpot = {0.02, 0.019, 0.03, 0.05};
  r.requests_per_s = 2;
  r.output_tokens_per_s = 512;
  r.tokens_per_s_per_gpu = 64;
  r.makespan_s = 100;
  r.completed = 200;
  r.capacity.blocks = 1000;
  r.capacity.block_size = 16;
  r.capacity.kv_bytes_per_token_rank = 131072;
  r.kv_utilization_mean = 0.5;
  r.kv_utilization_peak = 0.9;
  const auto text = serving_summary_text(r);
  CHECK(text.find("TTFT                    0.500      0.400      0.800      1.200  s\n") !=
        std::string::npos);
  CHECK(text.find("TPOT                   20.000     19.000     30.000     50.000  ms\n") !=
        std::string::npos);
  CHECK(text.find(
            "throughput: 2.000 req/s, 512.0 output tokens/s, 64.0 tokens/s/GPU over 100.00 s") !=
        std::string::npos);
  CHECK(text.find("KV cache: 1000 blocks × 16 tokens per replica (131.1 KB/token/GPU); utilisation "
                  "mean 50.0 %, peak 90.0 %") != std::string::npos);
  CHECK(text.find("prefix cache") == std::string::npos);  // off: no line
  const auto j = serving_json(r);
  CHECK(j["ttft_s"]["p99"] == 1.2);
  CHECK(j["throughput"]["output_tokens_per_s"] == 512);
  CHECK(j["kv_cache"]["tokens_per_replica"] == 16000);
}
