#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using meshsim::test::model_path;
using meshsim::test::run_cli;
using meshsim::test::source_path;
using meshsim::test::topology_path;
using nlohmann::json;

namespace {
json memory_json(const std::string& args) {
  return meshsim::test::run_cli_json("memory " + args + " --json");
}
}  // namespace

TEST_CASE("memory: the seed's 70B model state over 64 GPUs") {
  // DESIGN.md seed checks: 140 GB of BF16 weights; DDP 1120 GB; ZeRO-1 ≈ 293 GB, ZeRO-2 ≈ 155
  // GB, ZeRO-3 ≈ 17.5 GB per GPU.
  const std::pair<int, double> rows[] = {{0, 1120}, {1, 293.1}, {2, 155.3}, {3, 17.5}};
  for (const auto& [zero, gb] : rows) {
    const auto j = memory_json("--stack ideal --workload " + model_path("dense-70b") +
                               " --mesh dp=64 --zero " + std::to_string(zero));
    const auto& zero_ = zero;  // clang 14 cannot capture a structured binding
    INFO("zero_ " << zero_);
    CHECK(j["model_state_bytes"].get<double>() / 1e9 == doctest::Approx(gb).epsilon(0.001));
    CHECK(j["fits"] == (zero == 3));
    CHECK(j["activations_modeled"] == false);
  }
  const auto j = memory_json("--workload " + model_path("dense-70b") + " --mesh dp=64");
  CHECK(j["per_gpu_bytes"]["weights"].get<double>() == 140e9);
  CHECK(j["params"]["total"].get<double>() == 70e9);
  for (const char* key : {"weights", "gradients", "optimizer", "activations", "temporary",
                          "communication", "allocator", "kv_cache"})
    CHECK(j["per_gpu_bytes"].contains(key));
  CHECK(j["gpu_bytes"].get<double>() == 80.0 * (1ull << 30));
}

TEST_CASE("memory: Llama 3.1 70B KV cache, serving") {
  const auto j = memory_json("--workload " + model_path("llama3.1-70b") +
                             " --mode serve --mesh tp=8 --concurrency 1 --context 32768");
  // ≈ 0.33 MB per token; 32,768 tokens ≈ 10.7 GB, split over 8 TP ranks.
  CHECK(j["kv_bytes_per_token"].get<double>() / 1e6 == doctest::Approx(0.33).epsilon(0.01));
  CHECK(j["per_gpu_bytes"]["kv_cache"].get<double>() * 8 / 1e9 ==
        doctest::Approx(10.7).epsilon(0.005));
  CHECK(j["fits"] == true);
  const auto text = run_cli("memory --workload " + model_path("llama3.1-70b") +
                            " --mode serve --mesh tp=1 --context 32768");
  CHECK(text.out.find("KV cache 0.3277 MB per token") != std::string::npos);
  CHECK(text.out.find("(10.74 GB per sequence)") != std::string::npos);
  CHECK(text.out.find("verdict: does not fit") != std::string::npos);
}

TEST_CASE("memory: Mixtral counts and a text table") {
  const auto r = run_cli("memory --workload " + source_path("workloads/jobs/mixtral-8x7b-4k.json") +
                         " --mesh dp=8,ep=8 --zero 1 --gpu H200-SXM-141GB");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("mixtral-8x7b (46.70 B parameters, 12.88 B active per token)") !=
        std::string::npos);
  CHECK(r.out.find("training, dp=8 tp=1 pp=1 cp=1 ep=8, ZeRO-1, recompute none") !=
        std::string::npos);
  CHECK(r.out.find("seq 4096, global batch 256, micro-batch 1, bf16") != std::string::npos);
  for (const char* row : {"weights", "gradients", "optimizer", "activations", "temporary",
                          "communication", "allocator", "kv_cache", "model state", "total"})
    CHECK(r.out.find(std::string("\n") + row + " ") != std::string::npos);
  CHECK(r.out.find("# GPU H200-SXM-141GB (141.00 GB)") != std::string::npos);
}

TEST_CASE("memory: the seed's 512-GPU 70B candidates fit; the GPU comes from a topology") {
  const auto j = memory_json("--workload " + source_path("workloads/jobs/llama3.1-70b-32k.json") +
                             " --mesh tp=8,pp=4,cp=4,dp=4 --zero 1 --recompute selective" +
                             " --topology " + source_path("topologies/dgx-h100-superpod.json"));
  CHECK(j["gpu"] == "H100-SXM5-80GB");
  CHECK(j["fits"] == true);
  CHECK(j["mesh"]["cp"] == 4);
  CHECK(j["stage_total_bytes"].size() == 4);
  // Recompute none keeps more than selective, which keeps more than full.
  auto act = [&](const std::string& rc) {
    return memory_json("--workload " + source_path("workloads/jobs/llama3.1-70b-32k.json") +
                       " --mesh tp=8,pp=4,cp=4,dp=4 --attention unfused --recompute " +
                       rc)["per_gpu_bytes"]["activations"]
        .get<double>();
  };
  CHECK(act("none") > act("selective"));
  CHECK(act("selective") > act("full"));
}

TEST_CASE("memory: bad input gives one error line and exit 2") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto bad = (dir / "meshsim_bad_model.json").string();
  std::ofstream(bad) << R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
    "num_attention_heads": 48, "vocab_size": 10, "intermediate_size": 8, "hidden_act": "silu"})";
  auto r = run_cli("memory --workload " + bad + " --mesh dp=1 --seq 128");
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "error: " + bad + ":/num_attention_heads: 48 heads do not divide the hidden size 4096\n");
  std::filesystem::remove(bad);

  const std::pair<std::string, std::string> cases[] = {
      {"--mesh tp=3 --seq 128",
       "error: --mesh: tp=3 does not divide the 64 attention heads of "
       "llama3.1-70b\n"},
      {"--mesh dp=2 --seq 128 --zero 5", "error: --zero: must be 0, 1, 2 or 3\n"},
      {"--mesh dp=2", "error: --seq: give the sequence length (or a job file with seq)\n"},
      {"--mesh dp=2 --seq 128 --dtype int4",
       "error: --dtype: 'int4': expected one of fp32, bf16, fp16, fp8\n"},
      {"--mesh dp=2 --seq 128 --recompute some",
       "error: --recompute: stack 'megatron' has no policy 'some' (its policies: none, selective, "
       "full)\n"},
      {"--mesh dp=2 --seq 128 --stack torchtitan --recompute block",
       "error: --recompute: stack 'torchtitan' has no policy 'block' (its policies: none, op, "
       "full, layer)\n"},
      {"--mesh dp=2 --seq 128 --stack nemo",
       "error: nemo: is neither a bundled stack (deepspeed, ideal, megatron, torchtitan, "
       "torchtitan-compile) nor a stack file that exists\n"},
      {"--mesh dp=2 --seq 128 --tp-overlap maybe", "error: --tp-overlap: "},
      {"--mesh dp=2 --seq 128 --gpu V100", "error: --gpu: unknown GPU 'V100' (known: "},
      {"--mesh dp=2 --mode serve --context 10",
       "error: --mesh: a serving replica is tp=..,pp=.. "
       "(replicas are separate GPUs)\n"},
  };
  for (const auto& [args, expected] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    r = run_cli("memory --workload " + model_path("llama3.1-70b") + " " + args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.starts_with(expected));
    CHECK(r.out.empty());
  }
  r = run_cli("memory --workload /nonexistent.json --mesh dp=1");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: /nonexistent.json: cannot open file\n");
}

TEST_CASE("memory: a bad stack file is one error line naming the file and field, exit 2") {
  // A model file is not a stack: its first unknown key is named with the file.
  const auto bad = model_path("llama3.1-8b");
  const auto r = run_cli("memory --workload " + bad + " --mesh dp=2 --seq 128 --stack " + bad);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.starts_with("error: " + bad + ":/"));
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

TEST_CASE("memory: --workload takes a Hugging Face id, bundled or in the local hub cache") {
  const auto bundled =
      run_cli("memory --workload meta-llama/Llama-3.1-8B --mesh tp=8 --seq 4k --json");
  REQUIRE_MESSAGE(bundled.exit_code == 0, bundled.err);
  const auto file =
      run_cli("memory --workload " + source_path("workloads/models/llama3.1-8b.json") +
              " --mesh tp=8 --seq 4096 --json");
  CHECK(bundled.out == file.out);
  // A config in huggingface_hub's cache layout, found through HF_HUB_CACHE.
  const auto hub = std::filesystem::temp_directory_path() / "meshsim_cli_hub";
  const auto snap = hub / "models--acme--Tiny-1B" / "snapshots" / "abc";
  std::filesystem::create_directories(snap);
  std::ofstream(snap / "config.json")
      << R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
             "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 32000, "hidden_act": "silu"})";
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  const auto cached = run_cli("memory --workload acme/Tiny-1B --mesh dp=1 --seq 2048");
  const auto typo = run_cli("memory --workload acme/Tiny-1 --mesh dp=1 --seq 2048");
  ::unsetenv("HF_HUB_CACHE");
  REQUIRE_MESSAGE(cached.exit_code == 0, cached.err);
  CHECK(cached.out.find("# meshsim memory: Tiny-1B") != std::string::npos);
  CHECK(typo.exit_code == 2);
  CHECK(
      typo.err.starts_with("error: acme/Tiny-1: not a file, a bundled model or a Hugging Face "
                           "id in the local cache (" +
                           hub.string() + ")"));
}

TEST_CASE("memory: --recompute-modules frees each module's tensors") {
  // Mixtral 8x7B, 4096 tokens, one micro-batch in flight on 32 layers: moe_act frees the
  // activation's output the down projection stores (8192 routed copies × 14336 × 2 B) and
  // layernorm the pre-MLP norm's output the router stores (4096 × 4096 × 2 B): 8 GiB in all
  // (flash attention's selective policy frees nothing).
  const std::string job = "--workload " + source_path("workloads/jobs/mixtral-8x7b-4k.json") +
                          " --mesh dp=8,ep=8 --zero 1 --gpu H200-SXM-141GB";
  const auto selective = memory_json(job + " --recompute selective");
  const auto modules = memory_json(job + " --recompute-modules moe_act,layernorm");
  CHECK(selective["per_gpu_bytes"]["activations"].get<double>() -
            modules["per_gpu_bytes"]["activations"].get<double>() ==
        32.0 * (2.0 * 8192 * 14336 + 2.0 * 4096 * 4096));
  const auto text = run_cli("memory " + job + " --recompute-modules moe_act,layernorm");
  CHECK(text.out.find("ZeRO-1, recompute selective (moe_act, layernorm), sp off") !=
        std::string::npos);
}

TEST_CASE("memory --tune-split reports the split train --tune-split runs") {
  using V = std::vector<std::int64_t>;
  // Llama 3.1 8B on one DGX H100, pp=2 (dp fills the node): train --tune-split lightens the
  // stage that carries the 128K-vocabulary head and loss.
  const std::string job = " --topology " + topology_path("dgx-h100.json") + " --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --mesh pp=2 --seq 4096 --gbs 64 --zero 1";
  const auto trained = meshsim::test::run_cli_json("train" + job + " --tune-split --json");
  const auto chunks = trained["stage_layers"].get<V>();
  REQUIRE(chunks.size() == 2);
  CHECK(chunks != V{16, 16});
  const auto own = memory_json(job);
  const auto tuned = memory_json(job + " --tune-split");
  CHECK(own["stage_layers"].get<V>() == V{16, 16});
  CHECK(tuned["stage_layers"].get<V>() == chunks);
  // The memory of that split given by hand, and train's peak.
  const auto by_hand = memory_json(job + " --stage-layers " + std::to_string(chunks[0]) + "," +
                                   std::to_string(chunks[1]));
  CHECK(tuned["stage_total_bytes"] == by_hand["stage_total_bytes"]);
  CHECK(tuned["total_bytes"].get<double>() ==
        doctest::Approx(trained["memory"]["total"].get<double>()).epsilon(1e-9));
  bool named = false;
  for (const auto& n : tuned["notes"])
    named = named || n.get<std::string>().find("--decoder-last-pipeline-num-layers " +
                                               std::to_string(chunks[1])) != std::string::npos;
  CHECK(named);
  // The text names each stage's layers; with interleaving, the chunks too.
  const auto text = run_cli("memory" + job + " --tune-split");
  CHECK(text.out.find("layers by stage " + std::to_string(chunks[0]) + " " +
                      std::to_string(chunks[1]) + "\n") != std::string::npos);
  const auto interleaved = run_cli("memory" + job + " --schedule interleaved:2");
  CHECK(interleaved.out.find("layers by stage 16 16 (chunks 8 8 8 8)\n") != std::string::npos);
  // A split given, or a serving replica: one error line, exit 2.
  const auto both = run_cli("memory" + job + " --tune-split --stage-layers 16,16");
  CHECK(both.exit_code == 2);
  CHECK(both.err == "error: --tune-split: --stage-layers gives the split; leave one of them out\n");
  const auto serve = run_cli("memory --workload " + model_path("dense-70b") +
                             " --mode serve --mesh tp=8 --context 4096 --tune-split");
  CHECK(serve.exit_code == 2);
  CHECK(serve.err ==
        "error: --tune-split: is for training (a serving replica splits its own way)\n");
}

TEST_CASE("memory on a stack balanced by time reports train's split, and its even fall-back") {
  using V = std::vector<std::int64_t>;
  // The ideal stack balances Llama 3.1 8B's stages by the kernel model's estimate (the head and
  // loss on the last stage: 17, 15 at 8K); at 11K that first stage no longer fits the GPU while
  // 16, 16 does, and train falls back to it with a note: memory says the same.
  const auto job = [](const std::string& seq) {
    return " --topology " + topology_path("dgx-h100.json") + " --workload " +
           source_path("workloads/models/llama3.1-8b.json") +
           " --mesh pp=2 --gbs 64 --zero 1 --stack ideal --seq " + seq;
  };
  for (const char* seq : {"8192", "11264"}) {
    INFO("seq " << seq);
    const auto trained = meshsim::test::run_cli_json("train" + job(seq) + " --json");
    const auto mem = memory_json(job(seq));
    CHECK(mem["stage_layers"] == trained["stage_layers"]);
    CHECK(mem["total_bytes"].get<double>() ==
          doctest::Approx(trained["memory"]["total"].get<double>()).epsilon(1e-9));
  }
  CHECK(memory_json(job("8192"))["stage_layers"].get<V>() == V{17, 15});
  const auto fallen = memory_json(job("11264"));
  CHECK(fallen["stage_layers"].get<V>() == V{16, 16});
  CHECK(fallen["notes"].dump().find("stages balanced by time did not fit memory") !=
        std::string::npos);
  // FP8 on an A100 has no time to balance by (train refuses it): memory splits evenly and says
  // why; --tune-split, which asks for that estimate, is refused.
  const std::string a100 = " --gpu A100-SXM4-80GB --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh pp=2,dp=4 --gbs 64 --seq 4096 --zero 1 --dtype fp8";
  const auto even = memory_json(a100 + " --stack ideal");
  CHECK(even["stage_layers"].get<V>() == V{16, 16});
  CHECK(even["notes"].dump().find("layers split evenly: train balances them by estimated time, "
                                  "which needs A100-SXM4-80GB's fp8 peak (it has none)") !=
        std::string::npos);
  const auto refused = run_cli("memory" + a100 + " --tune-split");
  CHECK(refused.exit_code == 2);
  CHECK(refused.err ==
        "error: --tune-split: A100-SXM4-80GB has no fp8 tensor-core peak to estimate the stages' "
        "time\n");
}
