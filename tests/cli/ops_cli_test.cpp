// meshsim ops on the bundled models: the layer's kernels named as the op catalogue names them,
// times that add up, the decode and chunk variants, backward, a profile, bad input.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using meshsim::test::model_path;
using meshsim::test::run_cli;
using meshsim::test::source_path;
using nlohmann::json;

namespace {
json ops_json(const std::string& args) {
  return meshsim::test::run_cli_json("ops " + args + " --json");
}

// The row of an op (by name and pass) in an ops --json document; null when absent.
json row(const json& doc, const std::string& name, const std::string& pass = "forward") {
  for (const auto& op : doc["ops"])
    if (op["name"] == name && op["pass"] == pass) return op;
  return nullptr;
}
}  // namespace

TEST_CASE("ops: one Llama layer on H100, TP 8, 4096 tokens") {
  const auto j = ops_json("--workload " + model_path("llama3.1-70b") +
                          " --gpu H100-SXM5-80GB --tokens 4096 --tp 8");
  CHECK(j["gpu"] == "H100-SXM5-80GB");
  CHECK(j["dtype"] == "bf16");
  CHECK(j["tokens"] == 4096);
  CHECK(j["tp"] == 8);
  const std::vector<std::string> layer = {"input_norm",
                                          "qkv_proj",
                                          "rope",
                                          "attention_core",
                                          "out_proj",
                                          "attention_residual",
                                          "post_attention_norm",
                                          "mlp_up",
                                          "mlp_activation",
                                          "mlp_down",
                                          "mlp_residual"};
  const std::vector<std::string> ends = {"embedding", "final_norm", "logits", "loss"};
  REQUIRE(j["ops"].size() == layer.size() + ends.size());
  double sum = 0;
  for (std::size_t i = 0; i < j["ops"].size(); ++i) {
    const auto& op = j["ops"][i];
    const bool is_end = i >= layer.size();
    CHECK(op["name"] == (is_end ? ends[i - layer.size()] : layer[i]));
    CHECK(op.value("ends", false) == is_end);
    CHECK(op["time_s"].get<double>() > 0);
    if (!is_end) sum += op["time_s"].get<double>();
  }
  CHECK(j["layer_time_s"].get<double>() == doctest::Approx(sum));
  // Kinds and FLOPs: QKV of 70B at TP 8 is 4096 × (64/8 + 2·8/8)·128 × 8192: 2·M·N·K.
  CHECK(j["ops"][1]["kind"] == "gemm");
  CHECK(j["ops"][1]["flops"].get<double>() == 2.0 * 4096 * 1280 * 8192);
  CHECK(j["ops"][0]["kind"] == "memory");
  CHECK(j["ops"][0]["class"] == "norm");
  CHECK(j["ops"][3]["kind"] == "attention");
  // Text: a table with the layer total and the ends.
  const auto t = run_cli("ops --workload " + model_path("llama3.1-70b") + " --gpu H100-SXM5-80GB " +
                         "--tokens 4096 --tp 8");
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("layer total") != std::string::npos);
  CHECK(t.out.find("TFLOP/s") != std::string::npos);
  CHECK(t.out.find("model ends") != std::string::npos);
}

TEST_CASE("ops text: traffic past 1000 MB in GB, and the op column as wide as the longest name") {
  // Llama 3.1 8B at 100,000 tokens: the input norm reads and writes 100,000 × 4096 bf16
  // values, 2 · 2 · 4.096e8 = 1.6384e9 bytes, shown as 1.64 GB (it read "1.64e+03 MB").
  const auto big = run_cli("ops --workload " + model_path("llama3.1-8b") +
                           " --gpu H100-SXM5-80GB --tokens 100000");
  REQUIRE_MESSAGE(big.exit_code == 0, big.err);
  CHECK(big.out.find("1.64 GB") != std::string::npos);
  CHECK(big.out.find("e+0") == std::string::npos);
  // DeepSeek-V3's shared_expert_activation is 24 characters: the column widens to it (one
  // space before the pass), and every row's pass starts where the header's does.
  const auto ds =
      run_cli("ops --workload " + model_path("deepseek-v3") + " --gpu H100-SXM5-80GB --tokens 512");
  REQUIRE_MESSAGE(ds.exit_code == 0, ds.err);
  CHECK(ds.out.find("shared_expert_activation forward ") != std::string::npos);
  const auto header = ds.out.find("\nop ");
  REQUIRE(header != std::string::npos);
  const auto pass_col = ds.out.find("pass", header) - (header + 1);
  CHECK(pass_col == 25);
  std::size_t rows = 0;
  for (auto at = ds.out.find(" forward ", header); at != std::string::npos;
       at = ds.out.find(" forward ", at + 1)) {
    CHECK(at + 1 - (ds.out.rfind('\n', at) + 1) == pass_col);
    ++rows;
  }
  CHECK(rows > 20);
}

TEST_CASE("ops: decode, chunked prefill, backward, fp8, other GPUs, a cluster's GPU") {
  const auto decode = ops_json("--workload " + model_path("llama3.1-8b") +
                               " --gpu A100-SXM4-80GB --tokens 64 --decode 64 --context 2048");
  CHECK(decode["ops"][3]["class"] == "decode_attention");
  const auto chunk = ops_json("--workload " + model_path("llama3.1-8b") +
                              " --gpu A100-SXM4-80GB --tokens 512 --context 3584");
  const auto fresh =
      ops_json("--workload " + model_path("llama3.1-8b") + " --gpu A100-SXM4-80GB --tokens 512");
  // The chunk's queries see 3584 more keys: more attention FLOPs, same GEMMs.
  CHECK(chunk["ops"][3]["flops"].get<double>() > 5 * fresh["ops"][3]["flops"].get<double>());
  CHECK(chunk["ops"][1]["time_s"] == fresh["ops"][1]["time_s"]);
  const auto bwd =
      ops_json("--workload " + model_path("llama3.1-8b") + " --tokens 2048 --pass backward");
  bool dgrad = false, wgrad = false;
  for (const auto& op : bwd["ops"]) {
    dgrad |= op["pass"] == "dgrad";
    wgrad |= op["pass"] == "wgrad";
  }
  CHECK((dgrad && wgrad));
  const auto bf16 = ops_json("--workload " + model_path("llama3.1-70b") + " --tokens 8192 --tp 4");
  const auto fp8 =
      ops_json("--workload " + model_path("llama3.1-70b") + " --tokens 8192 --tp 4 --dtype fp8");
  CHECK(row(fp8, "mlp_up")["time_s"].get<double>() < row(bf16, "mlp_up")["time_s"].get<double>());
  const auto b200 =
      ops_json("--workload " + model_path("llama3.1-8b") + " --gpu B200-SXM-180GB --tokens 1024");
  CHECK(b200["kernel_model"].get<std::string>().find("scaled to B200") != std::string::npos);
  const auto cluster = ops_json("--workload " + model_path("llama3.1-8b") + " --topology " +
                                source_path("topologies/dgx-a100.json") + " --tokens 1024");
  CHECK(cluster["gpu"] == "A100-SXM4-80GB");
  // A profile with half the 16-bit GEMM fraction slows the big GEMMs.
  const auto with = ops_json("--workload " + model_path("llama3.1-8b") + " --gpu H100-SXM5-80GB " +
                             "--tokens 8192 --calibration " +
                             source_path("tests/compute/data/half-gemm-h100.json"));
  const auto plain =
      ops_json("--workload " + model_path("llama3.1-8b") + " --gpu H100-SXM5-80GB --tokens 8192");
  CHECK(with["ops"][7]["time_s"].get<double>() > 1.5 * plain["ops"][7]["time_s"].get<double>());
}

TEST_CASE("ops: FP8 lists the stack's quantization kernels around each GEMM") {
  // Llama 3.1 70B at 8192 tokens on TP 4, FP8, Megatron's stack (Transformer Engine): QKV and
  // FC1 transpose the FP8 output of their fused norm (2 B an element of 8192 × 8192); the output
  // projection and FC2 cast_transpose their 16-bit inputs (4 B an element of 8192 × 2048 and
  // 8192 × 7168). Backward (no SP in this view): every output gradient is cast_transposed.
  const std::string base = "--workload " + model_path("llama3.1-70b") + " --tokens 8192 --tp 4";
  const auto fp8 = ops_json(base + " --dtype fp8");
  const double T = 8192;
  CHECK(row(fp8, "qkv_proj.fp8_cast")["bytes"].get<double>() == 2 * T * 8192);
  CHECK(row(fp8, "out_proj.fp8_cast")["bytes"].get<double>() == 4 * T * 2048);
  CHECK(row(fp8, "mlp_up.fp8_cast")["bytes"].get<double>() == 2 * T * 8192);
  CHECK(row(fp8, "mlp_down.fp8_cast")["bytes"].get<double>() == 4 * T * 7168);
  CHECK(row(fp8, "mlp_down.fp8_cast")["kind"] == "memory");
  CHECK(row(fp8, "mlp_down.fp8_cast")["class"] == "elementwise");
  const auto bwd = ops_json(base + " --dtype fp8 --pass backward");
  CHECK(row(bwd, "qkv_proj.fp8_cast", "dgrad")["bytes"].get<double>() == 4 * T * 2560);
  CHECK(row(bwd, "out_proj.fp8_cast", "dgrad")["bytes"].get<double>() == 4 * T * 8192);
  CHECK(row(bwd, "mlp_up.fp8_cast", "dgrad")["bytes"].get<double>() == 4 * T * 14336);
  // The output layer stays 16-bit: no casts, 16-bit GEMM time.
  CHECK(row(fp8, "logits.fp8_cast").is_null());
  const auto bf16 = ops_json(base);
  CHECK(row(fp8, "logits")["time_s"] == row(bf16, "logits")["time_s"]);
  CHECK(row(bf16, "qkv_proj.fp8_cast").is_null());
  // The ideal stack (and a 16-bit run) price none.
  CHECK(row(ops_json(base + " --dtype fp8 --stack ideal"), "qkv_proj.fp8_cast").is_null());
  // torchtitan (torchao, dynamic scaling): the output projection's 2048 × 8192 weight shard and
  // its 8192 × 2048 input are each an amax pass (2 B an element) then a cast_transpose (4 B);
  // backward, its 8192 × 8192 output gradient the same. Megatron's FP8 weights need no cast.
  const auto tt = ops_json(base + " --dtype fp8 --stack torchtitan-compile");
  CHECK(row(tt, "out_proj.fp8_weight_amax")["bytes"].get<double>() == 2 * 2048 * 8192);
  CHECK(row(tt, "out_proj.fp8_weight_cast")["bytes"].get<double>() == 4 * 2048 * 8192);
  CHECK(row(tt, "out_proj.fp8_amax")["bytes"].get<double>() == 2 * T * 2048);
  CHECK(row(tt, "out_proj.fp8_cast")["bytes"].get<double>() == 4 * T * 2048);
  const auto tt_bwd = ops_json(base + " --dtype fp8 --stack torchtitan-compile --pass backward");
  CHECK(row(tt_bwd, "out_proj.fp8_amax", "dgrad")["bytes"].get<double>() == 2 * T * 8192);
  CHECK(row(tt_bwd, "out_proj.fp8_cast", "dgrad")["bytes"].get<double>() == 4 * T * 8192);
  CHECK(row(fp8, "out_proj.fp8_weight_cast").is_null());
}

TEST_CASE("ops: Llama 4 Maverick's dense and MoE layers alternate; the default is the first MoE") {
  const std::string base =
      "--workload " + model_path("llama4-maverick") + " --tokens 2048 --gpu H100-SXM5-80GB";
  const auto dense = ops_json(base + " --layer 0");
  CHECK(!row(dense, "mlp_up").is_null());
  CHECK(row(dense, "expert_up").is_null());
  const auto moe = ops_json(base);  // layer 1
  CHECK(row(moe, "mlp_up").is_null());
  CHECK(!row(moe, "expert_up").is_null());
  CHECK(!row(moe, "shared_expert_up").is_null());
  // The dense MLP's up projection: 2048 tokens × 2·16384 × 5120.
  CHECK(row(dense, "mlp_up")["flops"].get<double>() == 2.0 * 2048 * 32768 * 5120);
}

TEST_CASE("ops: torchtitan's Float8 leaves the routed experts 16-bit, Megatron's runs them FP8") {
  // Mixtral 8x7B at 4096 tokens on TP 2 (EP 2 in this view): torchao converts the linears only,
  // so an expert GEMM costs what it costs in a 16-bit run and has no quantization kernels, while
  // the attention linears run FP8; Transformer Engine's GroupedLinear runs the experts in FP8.
  const std::string base = "--workload " + model_path("mixtral-8x7b") + " --tokens 4096 --tp 2";
  const auto tt8 = ops_json(base + " --dtype fp8 --stack torchtitan");
  const auto tt16 = ops_json(base + " --stack torchtitan");
  const auto mg8 = ops_json(base + " --dtype fp8");
  const auto mg16 = ops_json(base);
  for (const char* name : {"expert_up", "expert_down"}) {
    INFO(name);
    CHECK(row(tt8, name)["time_s"] == row(tt16, name)["time_s"]);
    CHECK(row(tt8, std::string(name) + ".fp8_cast").is_null());
    CHECK(row(mg8, name)["time_s"].get<double>() < row(mg16, name)["time_s"].get<double>());
  }
  CHECK(row(tt8, "out_proj")["time_s"].get<double>() <
        row(tt16, "out_proj")["time_s"].get<double>());
  CHECK(!row(tt8, "out_proj.fp8_cast").is_null());
}

TEST_CASE("ops: bad input is one error line and exit 2") {
  const auto base = "ops --workload " + model_path("llama3.1-8b") + " ";
  const std::pair<std::string, std::string> cases[] = {
      {"--tokens 0", "error: --tokens: must be a positive integer"},
      {"--tokens 8 --tp 3", "error: --tp: 3 does not divide the model's 32 attention heads"},
      {"--tokens 8 --gpu X1", "error: --gpu: unknown GPU 'X1'"},
      {"--tokens 8 --pass sideways", "error: --pass: 'sideways': expected forward or backward"},
      {"--tokens 8 --decode 4", "error: --context: a decode step needs the sequences' context"},
      {"--tokens 8 --dtype int4", "error: --dtype:"},
      {"--tokens 8 --layer 99", "error: --layer: the model has 32 layers"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_cli(base + args);
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_ << " → " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.starts_with(message));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  const auto r = run_cli("ops --workload " + model_path("dense-70b") + " --tokens 8");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no architecture") != std::string::npos);
}

TEST_CASE("ops: a profile with the host's time per launch shows launch-bound layers") {
  // 20 µs of host time a launch: torchtitan's eager RMSNorm is 8 launches (160 µs), each GEMM
  // part 1; 8B at 1,024 tokens on TP 8 launches its forward layer in 34 × 20 = 680 µs, more than
  // the kernels take: launch-bound. Without the measurement neither field nor column appears.
  const auto profile = (std::filesystem::temp_directory_path() / "meshsim_ops_host.json").string();
  {
    std::ofstream f(profile);
    f << R"({"gpu": "H100-SXM5-80GB", "source": "test", "host_per_kernel_us": 20})";
  }
  const std::string args = "--workload " + model_path("llama3.1-8b") +
                           " --gpu H100-SXM5-80GB --tokens 1024 --tp 8 --stack torchtitan";
  const auto j = ops_json(args + " --calibration " + profile);
  CHECK(j["host_per_kernel_s"].get<double>() == doctest::Approx(20e-6));
  double launches = 0;
  for (const auto& op : j["ops"]) {
    const double kernels = op.value("kernels", 1);
    CHECK(op["host_s"].get<double>() == doctest::Approx(kernels * 20e-6));
    if (op["name"] == "input_norm") CHECK(kernels == 8);
    if (!op.value("ends", false)) launches += kernels;
  }
  CHECK(launches == 34);
  CHECK(j["layer_host_s"].get<double>() == doctest::Approx(680e-6));
  CHECK(j["layer_host_s"].get<double>() > j["layer_time_s"].get<double>());
  const auto text = run_cli("ops " + args + " --calibration " + profile);
  REQUIRE_MESSAGE(text.exit_code == 0, text.err);
  CHECK(text.out.find("launched in 680.0 µs of host time: launch-bound") != std::string::npos);
  const auto plain = ops_json(args);
  CHECK_FALSE(plain.contains("layer_host_s"));
  CHECK_FALSE(plain["ops"][0].contains("host_s"));
  std::remove(profile.c_str());
}
