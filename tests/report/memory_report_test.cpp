#include "report/memory_report.hpp"

#include <doctest/doctest.h>

using namespace meshsim;

namespace {

MemoryRun run_on(const ParallelConfig& cfg, double gpu_bytes) {
  MemoryRun run;
  run.model = "m";
  run.params.total = 70e9;
  run.params.active = 7e9;
  run.gpu = "G";
  run.gpu_bytes = gpu_bytes;
  run.config = &cfg;
  return run;
}

}  // namespace

TEST_CASE("memory report, training: the worst stage's categories, its totals and the verdict") {
  ParallelConfig cfg;
  cfg.mesh = {4, 2, 2, 1, 1, 0};
  cfg.zero = 1;
  TrainingMemoryJob job{4096, 64, 2, DType::bf16, {}};
  MemoryBreakdown s0, s1;
  s0.weights = 10e9;
  s0.stage = 0;
  // Stage 1 is the larger: 12 + 24 + 6 + 3 = 45 GB, 36 GB of it model state.
  s1.weights = 12e9;
  s1.optimizer = 24e9;
  s1.activations = 6e9;
  s1.allocator = 3e9;
  s1.stage = 1;
  auto run = run_on(cfg, 80e9);
  run.training = &job;
  run.stages = {s0, s1};
  CHECK(reported_memory(run).stage == 1);
  const auto text = memory_text(run);
  CHECK(text.find("# meshsim memory: m (70.00 B parameters, 7.00 B active per token)\n") == 0);
  CHECK(text.find("ZeRO-1, recompute none, sp off") != std::string::npos);
  CHECK(text.find("# seq 4096, global batch 64, micro-batch 2, bf16; worst pipeline stage 1 of "
                  "2\n") != std::string::npos);
  CHECK(text.find("# GPU G (80.00 GB); GB = 10^9 bytes\n") != std::string::npos);
  CHECK(text.find("optimizer              24.00\n") != std::string::npos);
  CHECK(text.find("model state            36.00\n") != std::string::npos);
  CHECK(text.find("total                  45.00\n") != std::string::npos);
  CHECK(text.find("total by stage  10.00 45.00\nverdict: fits (35.00 GB free of 80.00)\n") !=
        std::string::npos);
  const auto j = memory_run_json(run);
  CHECK(j["mode"] == "train");
  CHECK(j["stage"] == 1);
  CHECK(j["stage_total_bytes"] == Json::array({10e9, 45e9}));
  CHECK(j["total_bytes"].get<double>() == doctest::Approx(45e9));
  CHECK(j["model_state_bytes"].get<double>() == doctest::Approx(36e9));
  CHECK(j["fits"] == true);
  CHECK(j["mesh"]["pp"] == 2);
  CHECK(j["params"]["active"].get<double>() == 7e9);
  CHECK_FALSE(j.contains("kv_bytes_per_token"));
}

TEST_CASE("memory report, serving: the KV cache line and a does-not-fit verdict") {
  ParallelConfig cfg;
  cfg.mesh = {1, 4, 1, 1, 1, 0};
  ServingMemoryJob job;
  job.tp = 4;
  job.concurrency = 64;
  job.context = 8192;
  MemoryBreakdown b;
  b.weights = 35e9;
  b.kv_cache = 50e9;
  auto run = run_on(cfg, 80e9);
  run.serving = &job;
  run.replica = b;
  // Llama-3-70B: 2 × 80 layers × 8 KV heads × 128 × 2 bytes = 327,680 bytes per token.
  run.kv_bytes_per_token = 327680;
  const auto text = memory_text(run);
  CHECK(text.find("# serving, tp=4 pp=1, bf16 weights, bf16 KV cache, 64 sequences × 8192 "
                  "tokens\n# KV cache 0.3277 MB per token for the whole model (2.68 GB per "
                  "sequence)\n") != std::string::npos);
  CHECK(text.find("kv_cache               50.00\n") != std::string::npos);
  CHECK(text.find("verdict: does not fit (5.00 GB over 80.00)\n") != std::string::npos);
  CHECK(text.find("total by stage") == std::string::npos);  // one replica, no stages
  const auto j = memory_run_json(run);
  CHECK(j["mode"] == "serve");
  CHECK(j["fits"] == false);
  CHECK(j["kv_bytes_per_token"] == 327680.0);
  CHECK_FALSE(j.contains("stage"));
  // A model given by its parameter count: no KV line, and the text says what is left out.
  run.has_architecture = false;
  run.replica.activations_modeled = false;
  const auto counted = memory_text(run);
  CHECK(counted.find("KV cache 0.") == std::string::npos);
  CHECK(counted.find("# the model is given by its parameter count only") != std::string::npos);
  CHECK(memory_run_json(run)["activations_modeled"] == false);
}
