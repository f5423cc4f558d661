#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using meshsim::test::run_cli;
using meshsim::test::source_path;
using meshsim::test::topology_path;
using nlohmann::json;

TEST_CASE("train: the acceptance run prints every key with non-trivial values") {
  const auto trace = (std::filesystem::temp_directory_path() / "meshsim_train_trace.json").string();
  const auto r =
      run_cli("train --topology " + topology_path("dgx-h100-superpod.json") + " --workload " +
              source_path("workloads/models/llama3.1-70b.json") +
              " --mesh tp=8,pp=4,cp=4,dp=4 --seq 32768 --gbs 32 --mbs 1 --json --trace " + trace);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto j = json::parse(r.out);
  for (const char* k :
       {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "hfu",
        "compute_s", "bubble_fraction", "checkpoint_s", "goodput_fraction"}) {
    INFO(k);
    REQUIRE(j.contains(k));
    CHECK(j[k].get<double>() > 0);
  }
  CHECK(j["mfu"].get<double>() < 1);
  // The step is 32 sequences of 32,768 tokens.
  CHECK(j["tokens_per_s"].get<double>() * j["step_time_s"].get<double>() ==
        doctest::Approx(32.0 * 32768));
  for (const char* g : {"tp", "dp", "pp", "cp", "ep"}) {
    CHECK(j["exposed_comm_s"].contains(g));
    CHECK(j["comm_bytes_per_gpu"].contains(g));
  }
  CHECK(j["exposed_comm_s"]["tp"].get<double>() > 0);
  CHECK(j["comm_bytes_per_gpu"]["cp"].get<double>() > 0);
  CHECK(j["comm_bytes_per_gpu"]["pp"].get<double>() > 0);
  CHECK(j["comm_bytes_per_gpu"]["dp"].get<double>() > 0);
  CHECK(j["exposed_comm_by_op_s"].size() >= 2);
  CHECK(j["memory"]["weights"].get<double>() > 0);
  CHECK(j["memory"]["activations"].get<double>() > 0);
  CHECK(j["mesh"] == json({{"dp", 4}, {"tp", 8}, {"pp", 4}, {"cp", 4}, {"ep", 1}, {"fsdp", 4}}));
  CHECK(j["stage_layers"] == json({20, 20, 20, 20}));
  CHECK(j["ranks"].size() == 4);

  // The trace is Chrome trace-event JSON: metadata naming processes (ranks) and threads
  // (streams), then complete events with microsecond timestamps and args.
  std::ifstream in(trace);
  const auto t = json::parse(in);
  const auto& ev = t["traceEvents"];
  REQUIRE(ev.size() > 1000);
  int complete = 0, names = 0;
  for (const auto& e : ev) {
    if (e["ph"] == "X") {
      ++complete;
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e.contains("pid"));
      CHECK(e.contains("tid"));
    } else if (e["ph"] == "M") {
      ++names;
    }
  }
  CHECK(complete > 1000);
  CHECK(names >= 4 * 2);
  std::filesystem::remove(trace);
}

TEST_CASE("train and memory: HSDP (--mesh ...,fsdp=N) shards over a sub-group") {
  const std::string job = " --topology " + topology_path("dgx-h100-superpod.json") +
                          " --nodes 8 --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --seq 4096 --gbs 64 --json --mesh dp=16,tp=2,pp=2";
  const std::string common = " --zero 3" + job;
  const auto hsdp = run_cli("train" + common + ",fsdp=4");
  REQUIRE_MESSAGE(hsdp.exit_code == 0, hsdp.err);
  const auto j = json::parse(hsdp.out);
  CHECK(j["mesh"]["dp"] == 16);
  CHECK(j["mesh"]["fsdp"] == 4);
  // The shard's all-reduce across the 4 replicas is there; plain ZeRO-3 has none.
  CHECK(j["exposed_comm_by_op_s"].contains("all_reduce"));
  const auto plain = json::parse(run_cli("train" + common).out);
  CHECK(plain["mesh"]["fsdp"] == 16);
  CHECK_FALSE(plain["exposed_comm_by_op_s"].contains("all_reduce"));
  // Memory: model state 4× that of sharding over all 16 (18 B/param on megatron: 16 + fp32
  // gradient bytes, over 4 rather than 16 ranks).
  const auto mem = json::parse(run_cli("memory" + common + ",fsdp=4").out);
  const auto mem_plain = json::parse(run_cli("memory" + common).out);
  CHECK(mem["model_state_bytes"].get<double>() ==
        doctest::Approx(4 * mem_plain["model_state_bytes"].get<double>()));
  CHECK(mem["mesh"]["fsdp"] == 4);
  // HSDP without sharded state, and a shard group that does not divide DP, are errors.
  auto bad = run_cli("train --zero 0" + job + ",fsdp=4");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "error: --mesh: fsdp=4 shards ZeRO/FSDP state over a sub-group; it needs --zero 1, 2 or "
        "3\n");
  bad = run_cli("train" + common + ",fsdp=3");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("fsdp=3 must divide dp=16") != std::string::npos);
}

TEST_CASE("train and memory: torchtitan's layer AC, from the flag and from its config") {
  const std::string job = " --topology " + topology_path("dgx-h100.json") + " --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --seq 4096 --gbs 8 --zero 3 --mesh dp=8 --stack torchtitan --json";
  auto step = [&](const std::string& flags) {
    const auto r = run_cli("train" + job + flags);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const auto none = step(" --recompute none"), full = step(" --recompute full"),
             layer = step(" --recompute layer");
  CHECK(layer["step_time_s"].get<double>() > none["step_time_s"].get<double>());
  CHECK(layer["step_time_s"].get<double>() < full["step_time_s"].get<double>());
  auto activations = [&](const std::string& policy) {
    const auto r = run_cli("memory" + job + " --recompute " + policy);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out)["per_gpu_bytes"]["activations"].get<double>();
  };
  // Half the blocks keep their activations, half only their input.
  CHECK(activations("layer") == doctest::Approx((activations("none") + activations("full")) / 2));
  // torchtitan's own config says it as selective_ac_option = "2".
  const auto toml = (std::filesystem::temp_directory_path() / "meshsim_layer_ac.toml").string();
  std::ofstream(toml) << "[parallelism]\ndata_parallel_shard_degree = -1\n[training]\n"
                         "seq_len = 4096\nlocal_batch_size = 1\n[activation_checkpoint]\n"
                         "mode = \"selective\"\nselective_ac_option = \"2\"\n";
  const std::string base = " --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") + " --json";
  const auto from = run_cli("train" + base + " --stack torchtitan --from-torchtitan " + toml);
  REQUIRE_MESSAGE(from.exit_code == 0, from.err);
  CHECK(json::parse(from.out)["step_time_s"].get<double>() ==
        doctest::Approx(layer["step_time_s"].get<double>()));
  // Any period runs on torchtitan (its layer policy takes one; what search emits): every
  // third block recomputed lies between every second and none.
  const auto toml3 = (std::filesystem::temp_directory_path() / "meshsim_layer_ac3.toml").string();
  std::ofstream(toml3) << "[parallelism]\ndata_parallel_shard_degree = -1\n[training]\n"
                          "seq_len = 4096\nlocal_batch_size = 1\n[activation_checkpoint]\n"
                          "mode = \"selective\"\nselective_ac_option = \"3\"\n";
  const auto third = run_cli("train" + base + " --stack torchtitan --from-torchtitan " + toml3);
  REQUIRE_MESSAGE(third.exit_code == 0, third.err);
  const auto every3 = json::parse(third.out);
  CHECK(every3["recompute"] == "full");
  CHECK(every3["recompute_every"] == 3);
  CHECK(every3["step_time_s"].get<double>() < layer["step_time_s"].get<double>());
  CHECK(every3["step_time_s"].get<double>() > none["step_time_s"].get<double>());
  // A stack without such a policy says so.
  const auto bad = run_cli("train" + base + " --stack megatron --from-torchtitan " + toml);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "error: --from-torchtitan: stack 'megatron' has no policy recomputing one layer in 2\n");
}

namespace {

// `train` of Llama 3.1 8B on one DGX H100 with `flags`, its JSON document (exit 0 required).
json train_8b_json(const std::string& flags) {
  const auto r =
      run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
              source_path("workloads/models/llama3.1-8b.json") + " --json --allow-oom" + flags);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("train: a launch configuration runs on the stack it names") {
  const auto run = train_8b_json;
  // A torchtitan config without --stack runs on torchtitan's stack: eager, or compiled with
  // async TP when it says so (the same step as the flags).
  const auto dir = std::filesystem::temp_directory_path();
  const auto eager = (dir / "meshsim_eager.toml").string(),
             comp = (dir / "meshsim_comp.toml").string();
  const std::string job =
      "[parallelism]\ntensor_parallel_degree = 2\n{}[training]\nseq_len = 4096\n"
      "local_batch_size = 1\n[activation_checkpoint]\nmode = \"none\"\n";
  std::ofstream(eager) << fmt::format(fmt::runtime(job), "");
  std::ofstream(comp) << fmt::format(fmt::runtime(job), "enable_async_tensor_parallel = true\n")
                      << "[compile]\nenable = true\ncomponents = [\"model\"]\n";
  const auto e = run(" --from-torchtitan " + eager);
  CHECK(e["stack"] == "torchtitan");
  CHECK(e["step_time_s"] == run(" --mesh tp=2 --zero 3 --seq 4096 --gbs 4 --recompute none "
                                "--stack torchtitan")["step_time_s"]);
  const auto c = run(" --from-torchtitan " + comp);
  CHECK(c["stack"] == "torchtitan-compile");
  CHECK(c["tp_overlap"] == true);
  CHECK(c["step_time_s"] == run(" --mesh tp=2 --zero 3 --seq 4096 --gbs 4 --recompute none "
                                "--stack torchtitan-compile --tp-overlap on")["step_time_s"]);
  // --stack and --tp-overlap still win over the config.
  CHECK(run(" --stack megatron --tp-overlap off --from-torchtitan " + comp)["stack"] == "megatron");
  // A Megatron line's --tp-comm-overlap turns TE's overlap on; --cross-entropy-loss-fusion runs
  // the catalogue's fused loss instead of the stack's unfused one (a shorter step).
  const std::string line =
      " --from-megatron \"--tensor-model-parallel-size 2 --sequence-parallel --seq-length 4096 "
      "--micro-batch-size 1 --global-batch-size 4 --bf16";
  const auto plain = run(line + "\"");
  const auto overlap = run(line + " --tp-comm-overlap\"");
  CHECK(plain["stack"] == "megatron");
  CHECK(overlap["tp_overlap"] == true);
  CHECK(overlap["step_time_s"] == run(" --mesh tp=2 --zero 0 --seq 4096 --gbs 4 --dtype bf16 "
                                      "--tp-overlap on")["step_time_s"]);
  const auto fused = run(line + " --cross-entropy-loss-fusion\"");
  CHECK(fused["stack"] == "megatron +fused-loss");
  CHECK(fused["step_time_s"].get<double>() < plain["step_time_s"].get<double>());
  // --fp8-param-gather: FP8 parameters, one byte of weights a linear parameter instead of three
  // (TE's bf16 weight and FP8 copy), gathered in FP8 by the distributed optimizer.
  const std::string fp8_line =
      " --from-megatron \"--tensor-model-parallel-size 2 --sequence-parallel --seq-length 4096 "
      "--micro-batch-size 1 --global-batch-size 8 --fp8-format hybrid "
      "--use-distributed-optimizer";
  const auto te = run(fp8_line + "\"");
  const auto fp8_params = run(fp8_line + " --fp8-param-gather\"");
  CHECK(fp8_params["stack"] == "megatron +fp8-params");
  CHECK(fp8_params["memory"]["weights"].get<double>() <
        te["memory"]["weights"].get<double>() * 0.5);
  CHECK(fp8_params["comm_bytes_per_gpu"]["dp"].get<double>() <
        te["comm_bytes_per_gpu"]["dp"].get<double>());
  // CP's exchange from either configuration: Megatron's --cp-comm-type all_gather and
  // torchtitan's rotate method alltoall (a ring) give the steps the flags give.
  const auto gathered =
      run(" --from-megatron \"--tensor-model-parallel-size 2 --context-parallel-size 2 "
          "--sequence-parallel --seq-length 4096 --micro-batch-size 1 --global-batch-size 2 --bf16 "
          "--cp-comm-type all_gather\"");
  CHECK(gathered["cp_comm"] == "allgather");
  CHECK(gathered["step_time_s"] == run(" --mesh tp=2,cp=2 --zero 0 --seq 4096 --gbs 2 --dtype "
                                       "bf16 --cp-comm allgather")["step_time_s"]);
  const auto rotating = (dir / "meshsim_cp.toml").string();
  std::ofstream(rotating) << fmt::format(
      fmt::runtime(job),
      "context_parallel_degree = 2\ncontext_parallel_rotate_method = \"alltoall\"\n");
  const auto ring = run(" --from-torchtitan " + rotating);
  CHECK(ring["cp_comm"] == "ring");
  CHECK(ring["step_time_s"] == run(" --mesh tp=2,cp=2 --zero 3 --seq 4096 --gbs 2 --recompute "
                                   "none --stack torchtitan --cp-comm ring")["step_time_s"]);
  // --cp-comm wins over the configuration.
  CHECK(run(" --cp-comm allgather --from-torchtitan " + rotating)["cp_comm"] == "allgather");
  std::filesystem::remove(rotating);
  // torchtitan's float8 all-gather under FSDP (8 shards): the stack says so in its name, FSDP
  // moves fewer bytes, and memory holds smaller gathered layers; a stack file saying
  // "fp8_fsdp_all_gather": "dynamic" runs the same step.
  const auto f8 = (dir / "meshsim_f8.toml").string(), f8ag = (dir / "meshsim_f8ag.toml").string();
  const std::string fp8_job =
      "[model]\nconverters = [\"float8\"]\n[training]\nseq_len = 4096\nlocal_batch_size = 1\n"
      "[activation_checkpoint]\nmode = \"none\"\n";
  std::ofstream(f8) << fp8_job;
  std::ofstream(f8ag) << fp8_job << "[float8]\nenable_fsdp_float8_all_gather = true\n";
  const auto wide = run(" --from-torchtitan " + f8);
  const auto narrow = run(" --from-torchtitan " + f8ag);
  CHECK(wide["stack"] == "torchtitan");
  CHECK(narrow["stack"] == "torchtitan +fp8-fsdp-all-gather");
  CHECK(narrow["comm_bytes_per_gpu"]["dp"].get<double>() <
        wide["comm_bytes_per_gpu"]["dp"].get<double>());
  CHECK(narrow["memory"]["temporary"].get<double>() < wide["memory"]["temporary"].get<double>());
  auto file = json::parse(std::ifstream(source_path("workloads/stacks/torchtitan.json")));
  file["name"] = "torchtitan-fp8-gather";
  file["fp8_fsdp_all_gather"] = "dynamic";
  const auto stack_file = (dir / "meshsim_f8ag_stack.json").string();
  std::ofstream(stack_file) << file.dump();
  CHECK(run(" --stack " + stack_file + " --from-torchtitan " + f8)["step_time_s"] ==
        narrow["step_time_s"]);
  // A config that says the switch wins over the stack file.
  std::ofstream(f8) << fp8_job << "[float8]\nenable_fsdp_float8_all_gather = false\n";
  CHECK(run(" --stack " + stack_file + " --from-torchtitan " + f8)["step_time_s"] ==
        wide["step_time_s"]);
  for (const auto& f : {f8, f8ag, stack_file}) std::filesystem::remove(f);
}

TEST_CASE("train and memory: the layers split as the framework splits them") {
  const auto run = train_8b_json;
  using V = std::vector<std::int64_t>;
  const std::string flags = " --mesh pp=4 --seq 4096 --gbs 8 --recompute full";
  // Megatron even, torchtitan 34 units less the ends, DeepSpeed by parameters.
  CHECK(run(flags)["stage_layers"].get<V>() == V{8, 8, 8, 8});
  CHECK(run(flags + " --stack torchtitan")["stage_layers"].get<V>() == V{8, 9, 8, 7});
  CHECK(run(flags + " --stack deepspeed")["stage_layers"].get<V>() == V{7, 9, 9, 7});
  // A Megatron line's ends: the middle stages share the rest; the step is --stage-layers'.
  const auto uneven = run(
      " --from-megatron \"--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 7 "
      "--decoder-last-pipeline-num-layers 7 --seq-length 4096 --micro-batch-size 1 "
      "--global-batch-size 8 --bf16 --recompute-granularity full --recompute-method uniform "
      "--recompute-num-layers 1\"");
  CHECK(uneven["stage_layers"].get<V>() == V{7, 9, 9, 7});
  CHECK(uneven["step_time_s"] == run(flags + " --stage-layers 7,9,9,7")["step_time_s"]);
  // A split the launch configuration gives is not tuned: train and memory say so.
  const std::string line =
      " --from-megatron \"--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 7 "
      "--decoder-last-pipeline-num-layers 7 --seq-length 4096 --micro-batch-size 1 "
      "--global-batch-size 8 --bf16\" --tune-split";
  for (const char* command : {"train --topology ", "memory --topology "}) {
    const auto given = run_cli(command + topology_path("dgx-h100.json") + " --workload " +
                               source_path("workloads/models/llama3.1-8b.json") + line);
    INFO(command);
    CHECK(given.exit_code == 2);
    CHECK(given.err ==
          "error: --tune-split: the launch configuration gives the split; leave --tune-split "
          "out\n");
  }
  // A torchtitan config's first-stage weight: 33 units, 9, 8, 8, 8, less the output's 1.
  const auto toml = (std::filesystem::temp_directory_path() / "meshsim_split.toml").string();
  std::ofstream(toml) << "[parallelism]\npipeline_parallel_degree = 4\n"
                         "pipeline_parallel_first_stage_less_layers = 0\n"
                         "pipeline_parallel_microbatch_size = 1\n"
                         "[training]\nseq_len = 4096\nlocal_batch_size = 8\n"
                         "[activation_checkpoint]\nmode = \"full\"\n";
  CHECK(run(" --from-torchtitan " + toml)["stage_layers"].get<V>() == V{9, 8, 8, 7});
  // The memory of the same stages, and the note where Megatron would need the ends given.
  const auto mem = run_cli("memory --workload " + source_path("workloads/models/llama3.1-8b.json") +
                           " --gpu H100-SXM5-80GB --mesh pp=5 --seq 4096 --gbs 5");
  REQUIRE_MESSAGE(mem.exit_code == 0, mem.err);
  CHECK(mem.out.find("note: stack 'megatron' splits the layers evenly, and 32 do not divide into "
                     "5 pipeline stages") != std::string::npos);
  CHECK(run_cli("memory --workload " + source_path("workloads/models/llama3.1-8b.json") +
                " --gpu H100-SXM5-80GB --mesh pp=5 --seq 4096 --gbs 5 --stack torchtitan")
            .out.find("note:") == std::string::npos);
  // memory --stage-layers: the stages train would run, each stage's total the same; a split
  // that does not fit the mesh or the model is one error line.
  const std::string mem_base = "memory --workload " +
                               source_path("workloads/models/llama3.1-8b.json") +
                               " --gpu H100-SXM5-80GB --mesh pp=4 --seq 4096 --gbs 8 --json";
  const auto given = run_cli(mem_base + " --stage-layers 7,9,9,7");
  REQUIRE_MESSAGE(given.exit_code == 0, given.err);
  // Megatron's default is the even split; another split moves the stages' totals.
  const auto total = [](const meshsim::test::CliResult& r) {
    return json::parse(r.out)["stage_total_bytes"];
  };
  CHECK(total(run_cli(mem_base + " --stage-layers 8,8,8,8")) == total(run_cli(mem_base)));
  CHECK(total(given) != total(run_cli(mem_base)));
  const auto wrong = run_cli(mem_base + " --stage-layers 8,8,8");
  CHECK(wrong.exit_code == 2);
  CHECK(wrong.err ==
        "error: --stage-layers: gives 3 stages; the mesh has 4 (pp × virtual stages)\n");
  const auto short_sum = run_cli(mem_base + " --stage-layers 8,8,8,7");
  CHECK(short_sum.err == "error: --stage-layers: sums to 31 layers; llama3.1-8b has 32\n");
}

TEST_CASE("train: text report and same bytes twice") {
  const std::string args = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/jobs/llama3.1-8b-8k.json") +
                           " --mesh tp=2,dp=4 --gbs 8 --zero 1";
  const auto a = run_cli(args);
  const auto b = run_cli(args);
  REQUIRE(a.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(a.out.find("# meshsim train: llama3.1-8b on dgx-h100 (8 × H100-SXM5-80GB)") !=
        std::string::npos);
  CHECK(a.out.find("ZeRO-1, sp on, schedule 1f1b") != std::string::npos);
  CHECK(a.out.find("step time") != std::string::npos);
  CHECK(a.out.find("MFU") != std::string::npos);
  CHECK(a.out.find("exposed comm tp") != std::string::npos);
  const auto f = run_cli(args + " --full --json");
  REQUIRE(f.exit_code == 0);
  CHECK(json::parse(f.out)["simulated_ranks"] == 8);
}

TEST_CASE("progress: --full, search and 10K-request serve runs report to a redirected stderr") {
  // Every line at once instead of every 5 s, so a short run shows them.
  const std::string now = "export MESHSIM_PROGRESS_INTERVAL_S=0; ";
  const std::string train = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                            source_path("workloads/jobs/llama3.1-8b-8k.json") +
                            " --mesh tp=2,dp=4 --gbs 8 --zero 1 --full";
  const auto t = run_cli(train, now);
  REQUIRE_MESSAGE(t.exit_code == 0, t.err);
  CHECK(t.err.find(" ops replayed in ") != std::string::npos);
  // stdout is the same with and without progress; --quiet silences it.
  const auto q = run_cli(train + " --quiet", now);
  CHECK(q.out == t.out);
  CHECK(q.err.find("ops replayed") == std::string::npos);
  const auto s =
      run_cli("search --topology " + topology_path("dgx-h100.json") + " --workload " +
                  source_path("workloads/models/llama3.1-8b.json") + " --seq 4096 --gbs 16 --top 3",
              now);
  REQUIRE_MESSAGE(s.exit_code == 0, s.err);
  CHECK(s.err.find(" layouts simulated in ") != std::string::npos);
  // The bounded search's total is only a bound (most layouts are ruled out before they are
  // simulated): no ETA from it, and the count left is called what it is.
  CHECK(s.err.find("ETA") == std::string::npos);
  CHECK(s.err.find(" left (a bound: fewer are usually needed)") != std::string::npos);
  // --exhaustive simulates every layout it counts, so its total and ETA are real.
  const auto e = run_cli("search --topology " + topology_path("dgx-h100.json") + " --workload " +
                             source_path("workloads/models/llama3.1-8b.json") +
                             " --seq 4096 --gbs 16 --top 3 --exhaustive",
                         now);
  REQUIRE_MESSAGE(e.exit_code == 0, e.err);
  CHECK(e.err.find(" layouts simulated in ") != std::string::npos);
  CHECK(e.err.find(", ETA ") != std::string::npos);
  const auto v = run_cli("serve --topology " + topology_path("dgx-h100.json") + " --workload " +
                             source_path("workloads/models/llama3.1-8b.json") +
                             " --mesh tp=1 --replicas 8 --rate 2000 --requests 10000 "
                             "--prompt fixed:128 --output fixed:8",
                         now);
  REQUIRE_MESSAGE(v.exit_code == 0, v.err);
  CHECK(v.err.find(" requests served in ") != std::string::npos);
  // A malformed interval is an error naming the variable.
  const auto bad = run_cli(train, "export MESHSIM_PROGRESS_INTERVAL_S=soon; ");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("MESHSIM_PROGRESS_INTERVAL_S: 'soon'") != std::string::npos);
}

TEST_CASE("train: flags for schedules, stage layers, heterogeneity") {
  const std::string base =
      "train --topology " + topology_path("dgx-h100-superpod.json") + " --nodes 2 --workload " +
      source_path("workloads/models/llama3.1-8b.json") + " --seq 4096 --gbs 16 --json";
  auto r =
      run_cli(base + " --mesh tp=4,pp=4 --schedule interleaved:2 --stage-layers 4,4,4,4,4,4,4,4");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(json::parse(r.out)["schedule"] == "interleaved:2");
  r = run_cli(base + " --mesh tp=8,pp=2 --schedule zb --straggler 3:1.3 --input-stall 0.05");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(json::parse(r.out)["exposed_comm_by_op_s"]["input_stall"] == 0.05);
  r = run_cli(base + " --mesh tp=2,cp=2,dp=4 --cp-comm allgather");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(json::parse(r.out)["comm_bytes_per_gpu"]["cp"].get<double>() > 0);
  CHECK(json::parse(r.out)["cp_comm"] == "allgather");
  // The exchange is the stack's unless --cp-comm says otherwise: torchtitan all-gathers.
  const auto step_of = [&](const std::string& extra) {
    const auto run = run_cli(base + " --mesh tp=2,cp=2,dp=4" + extra);
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    return json::parse(run.out);
  };
  CHECK(step_of("")["cp_comm"] == "ring");
  const auto titan = step_of(" --stack torchtitan");
  CHECK(titan["cp_comm"] == "allgather");
  const auto titan_ring = step_of(" --stack torchtitan --cp-comm ring");
  CHECK(titan_ring["cp_comm"] == "ring");
  CHECK(titan["step_time_s"] != titan_ring["step_time_s"]);
  r = run_cli(base + " --mesh tp=2,dp=8 --zero 1");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(!json::parse(r.out).contains("cp_comm"));  // no CP, no exchange
  const std::string text = "train --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 2 --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --seq 4096 --gbs 16 --mesh tp=2,cp=2,dp=4 --stack torchtitan --zero 3";
  r = run_cli(text);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("# stack: torchtitan (TP overlap off, interference modelled, CP K/V "
                   "allgather)\n") != std::string::npos);
}

TEST_CASE("train: a degraded NIC slows the data-parallel reduction, folded and full alike") {
  const std::string base = "train --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 4 --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh tp=8,dp=4 --seq 4096 --gbs 32 --json";
  auto step = [&](const std::string& extra) {
    const auto r = run_cli(base + extra);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out)["step_time_s"].get<double>();
  };
  const double healthy = step("");
  const double slow = step(" --degrade-link n1/nic0:0.1");
  CHECK(slow > healthy);
  CHECK(step(" --degrade-link n1/nic0:0.1 --full") == doctest::Approx(slow).epsilon(0.01));
  const auto r = run_cli(base + " --degrade-link n1/nicX:0.5");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: --degrade-link: no vertex named 'n1/nicX' in the cluster\n");
  CHECK(run_cli(base + " --degrade-link n1/nic0:2").err ==
        "error: --degrade-link: 'n1/nic0:2': expected VERTEX:FACTOR with 0 < FACTOR <= 1\n");
}

TEST_CASE("train: invalid meshes and flags give one error line and exit 2") {
  const std::string base = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") + " ";
  const std::pair<std::string, std::string> cases[] = {
      {"--seq 4096 --mesh dp=4",
       "error: --mesh: dp=4 tp=1 pp=1 cp=1 ep=1 has 4 ranks but the cluster has 8 "
       "GPUs (change the mesh or --nodes)\n"},
      {"--seq 4096 --mesh tp=3,dp=2",
       "error: --mesh: tp=3 does not divide the 32 attention heads of "
       "llama3.1-8b\n"},
      {"--seq 4096 --mesh pp=8 --gbs 8 --schedule interleaved:8",
       "error: --mesh: pp=8 × 8 virtual stages needs at least that many layers; llama3.1-8b has "
       "32\n"},
      {"--seq 4104 --mesh cp=8",
       "error: --seq: sequence 4104 is not a multiple of 16 (2 × cp: causal load "
       "balancing gives each CP rank two chunks)\n"},
      {"--mesh dp=8", "error: --seq: give the sequence length (or a job file with seq)\n"},
      {"--seq 4096 --mesh dp=8 --gbs 12",
       "error: --gbs: global batch 12 is not a multiple of dp × "
       "micro-batch = 8\n"},
      {"--seq 4096 --mesh dp=8 --stage-layers 8,8",
       "error: --stage-layers: gives 2 stages; the mesh has 1 "
       "(pp × virtual stages)\n"},
      {"--seq 4096 --mesh pp=2,dp=4 --stage-layers 10,20",
       "error: --stage-layers: sums to 30 layers; "
       "llama3.1-8b has 32\n"},
      {"--seq 4096 --mesh dp=8 --straggler 9:2",
       "error: --straggler: '9:2': expected RANK:FACTOR with an "
       "existing rank and a factor >= 1\n"},
      {"--seq 4096 --mesh dp=8 --cp-comm star",
       "error: --cp-comm: 'star': expected ring or allgather\n"},
      {"--seq 4096 --mesh dp=8 --rank-order tp-dp-pp",
       "error: --rank-order: 'tp-dp-pp': each dimension "
       "exactly once\n"},
  };
  for (const auto& [args, expected] : cases) {
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    const auto r = run_cli(base + args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == expected);
    CHECK(r.out.empty());
  }
  const auto r = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                         source_path("workloads/models/dense-70b.json") + " --mesh dp=8 --seq 64");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("training needs an architecture") != std::string::npos);
  // A job file's batch that the mesh cannot split names the file's field, not --gbs (which was
  // not given); --gbs still overrides it.
  const auto job = source_path("workloads/jobs/llama3.1-8b-8k.json");
  const auto from_file = run_cli("train --topology " + topology_path("dgx-h100.json") +
                                 " --workload " + job + " --mesh tp=1,dp=3 --zero 3");
  CHECK(from_file.exit_code == 2);
  CHECK(from_file.err == "error: " + job +
                             ":/global_batch: global batch 512 is not a multiple of dp × "
                             "micro-batch = 3 (--gbs overrides it)\n");
  CHECK(run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " + job +
                " --mesh tp=1,dp=3 --zero 3 --gbs 7")
            .err == "error: --gbs: global batch 7 is not a multiple of dp × micro-batch = 3\n");
  // `memory` goes through the same rule.
  CHECK(run_cli("memory --topology " + topology_path("dgx-h100.json") + " --workload " + job +
                " --mesh tp=1,dp=3 --zero 3")
            .err == from_file.err);
  // A launch configuration's batch names the configuration (--gbs cannot be given with it):
  // Megatron-LM's own divisibility assertion, and the micro-batch limit for a torchtitan file.
  // refused(flag, file, text): the error for a launch file holding `text`, and its expected start.
  const auto refused = [&job](const std::string& flag, const std::string& file,
                              const std::string& text) {
    const auto path = (std::filesystem::temp_directory_path() / file).string();
    std::ofstream(path) << text;
    const auto run = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                             job + " " + flag + " " + path);
    CHECK(run.exit_code == 2);
    return std::pair{run.err, "error: " + path + ": "};
  };
  const auto [megatron, script] =
      refused("--from-megatron", "meshsim_bad_batch_megatron.sh",
              "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 \\\n"
              "  --micro-batch-size 1 --global-batch-size 6 --seq-length 4096\n");
  CHECK(megatron == script +
                        "--global-batch-size 6 is not a multiple of --micro-batch-size 1 × the "
                        "data-parallel degree 4\n");
  const auto [titan, toml] =
      refused("--from-torchtitan", "meshsim_bad_batch_torchtitan.toml",
              "[training]\nlocal_batch_size = 1\nglobal_batch_size = 80000\nseq_len = 1024\n");
  CHECK(titan == toml +
                     "global batch 80000 is 10000 micro-batches per step for dp × micro-batch = "
                     "8; the limit is 8192 (training.global_batch_size)\n");
}

TEST_CASE("train: reliability flags out of their domain are errors, not defaults") {
  const std::string base = "train --topology " + meshsim::test::topology_path("dgx-h100.json") +
                           " --workload " +
                           meshsim::test::source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh tp=8 --seq 4096 --gbs 8 ";
  for (const auto& [flags, message] :
       {std::pair<std::string, std::string>{"--storage-bw 0", "error: --storage-bw: '0'"},
        {"--storage-bw 1e-300", "error: --storage-bw: '1e-300'"},
        {"--mtbf-hours 0", "error: --mtbf-hours: '0'"},
        {"--mtbf-hours 1e308", "error: --mtbf-hours: '1e308'"},
        {"--restart-s -5", "error: --restart-s: '-5'"}}) {
    const auto r = meshsim::test::run_cli(base + flags);
    const auto& flags_ = flags;  // clang 14 cannot capture a structured binding
    INFO(flags_ << " → " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.starts_with(message));
  }
}

TEST_CASE(
    "train and memory: over memory on the stack's own split, the end switches' split that fits") {
  // Llama 3.1 70B tp=4 pp=8 ZeRO-0 at 8K on 4 DGX H100 nodes: Megatron's 10 layers a stage leave
  // the first stage (8 micro-batches in flight) over 80 GiB. The middle stages hold 10 at most,
  // the first 9, the last takes the 11 left.
  const std::string job = " --workload " + source_path("workloads/models/llama3.1-70b.json") +
                          " --mesh dp=1,tp=4,pp=8 --zero 0 --recompute none --seq 8192 --gbs 64";
  const std::string train =
      "train --topology " + topology_path("dgx-h100-superpod.json") + " --nodes 4" + job;
  const std::string note =
      "over memory on the stack's own split; a split its end switches give fits: 9, 10, 10, 10, "
      "10, 10, 10, 11 layers per chunk (--tune-split runs the least busy split that fits)";
  const auto over = run_cli(train);
  CHECK(over.exit_code == 3);
  CHECK(over.out.find("note: " + note + "\n") != std::string::npos);
  const auto js = run_cli(train + " --json");
  CHECK(js.exit_code == 3);
  CHECK(json::parse(js.out)["notes"] == json::array({note}));
  const auto mem = run_cli("memory --gpu H100-SXM5-80GB" + job);
  CHECK(mem.exit_code == 0);
  CHECK(mem.out.find("verdict: does not fit") != std::string::npos);
  CHECK(mem.out.find("note: " + note + "\n") != std::string::npos);
  // --tune-split runs a split that fits, the least busy of them, and says it moved layers for
  // memory.
  const auto tuned = run_cli(train + " --tune-split --json");
  REQUIRE_MESSAGE(tuned.exit_code == 0, tuned.err);
  const auto t = json::parse(tuned.out);
  CHECK(t["memory"]["fits"] == true);
  CHECK(t["stage_layers"] != json::array({10, 10, 10, 10, 10, 10, 10, 10}));
  const auto& notes = t["notes"];
  CHECK(std::any_of(notes.begin(), notes.end(), [](const json& n) {
    return n.get<std::string>().find("to fit memory") != std::string::npos;
  }));
}

TEST_CASE("train: a layout past the GPU's memory exits 3 with the verdict; --allow-oom runs it") {
  // Llama 3.1 8B with plain DDP keeps 16 bytes of model state per parameter on every GPU (about
  // 128 GB), over the H100's 80 GiB.
  const std::string args = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh dp=8 --seq 4096 --gbs 8";
  const auto text = run_cli(args);
  CHECK(text.exit_code == 3);
  CHECK(text.out.find("verdict: does not fit: stage 0 needs") != std::string::npos);
  CHECK(text.out.find("--allow-oom") != std::string::npos);
  CHECK(text.out.find("tokens/s") == std::string::npos);  // no step is reported

  const auto js = run_cli(args + " --json");
  CHECK(js.exit_code == 3);
  const auto j = json::parse(js.out);  // stdout is the JSON document alone
  CHECK(j["fits"] == false);
  CHECK(j["memory"]["total"].get<double>() > j["memory"]["gpu_bytes"].get<double>());
  CHECK(
      j["memory"]["over_bytes"].get<double>() ==
      doctest::Approx(j["memory"]["total"].get<double>() - j["memory"]["gpu_bytes"].get<double>()));
  CHECK(!j.contains("step_time_s"));
  CHECK(js.err.find("verdict: does not fit") != std::string::npos);

  const auto oom = run_cli(args + " --json --allow-oom");
  REQUIRE_MESSAGE(oom.exit_code == 0, oom.err);
  const auto k = json::parse(oom.out);
  CHECK(k["memory"]["fits"] == false);
  CHECK(k["step_time_s"].get<double>() > 0);
}

TEST_CASE("train: --seq takes K suffixes and a mesh without dp fills the cluster") {
  const std::string base = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") + " --zero 3 --json";
  const auto suffixed = run_cli(base + " --mesh tp=2 --seq 4k --gbs 8");
  const auto plain = run_cli(base + " --mesh dp=4,tp=2 --seq 4096 --gbs 8");
  REQUIRE_MESSAGE(suffixed.exit_code == 0, suffixed.err);
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
  const auto j = json::parse(suffixed.out);
  CHECK(j["mesh"]["dp"] == 4);  // 8 GPUs / tp=2
  CHECK(j["step_time_s"] == json::parse(plain.out)["step_time_s"]);
  CHECK(j["tokens_per_s"].get<double>() * j["step_time_s"].get<double>() ==
        doctest::Approx(8.0 * 4096));

  const auto odd = run_cli(base + " --mesh tp=3 --seq 4096");
  CHECK(odd.exit_code == 2);
  CHECK(odd.err ==
        "error: --mesh: 'tp=3': dp is left out, and tp·pp·cp = 3 does not divide the cluster's 8 "
        "GPUs\n");
  const auto bad = run_cli(base + " --mesh tp=2 --seq 4G");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "error: --seq: invalid token count '4G': unknown suffix (use K or M)\n");
}

TEST_CASE("--help shows the defaults that are used, not the placeholders of unset options") {
  const auto r = run_cli("train --help");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("--schedule TEXT=1f1b") != std::string::npos);
  // --stack's default depends on --from-torchtitan, so its help says it in words.
  CHECK(r.out.find("--stack TEXT=") == std::string::npos);
  CHECK(r.out.find("Software stack: megatron (default;") != std::string::npos);
  CHECK(r.out.find("--rank-order TEXT=tp-cp-dp-pp") != std::string::npos);
  CHECK(r.out.find("--gbs INT=0") == std::string::npos);  // 0: "dp × mbs" or the job file's
  CHECK(r.out.find("--gbs INT") != std::string::npos);
  const auto s = run_cli("serve --help");
  CHECK(s.out.find("--engine TEXT=vllm") != std::string::npos);
}

TEST_CASE("train: a stack file that captures layers as CUDA graphs launches far fewer ops") {
  // Megatron's stack with "cuda_graphs": "layer" and a profile that measured 200 µs of host time
  // a launch: Llama 3.1 8B on TP 8 at 1,024 tokens is host-bound eagerly; with layer graphs each
  // layer pass is one launch and the host keeps ahead.
  const auto dir = std::filesystem::temp_directory_path();
  const auto stack = (dir / "meshsim_megatron_graphs.json").string();
  auto doc = json::parse(std::ifstream(source_path("workloads/stacks/megatron.json")));
  doc["name"] = "megatron-graphs";
  doc["cuda_graphs"] = "layer";
  std::ofstream(stack) << doc.dump();
  const auto profile = (dir / "meshsim_host200.json").string();
  std::ofstream(profile)
      << R"({"gpu": "H100-SXM5-80GB", "source": "test", "host_per_kernel_us": 200})";
  const std::string job = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --mesh tp=8 --seq 1024 --gbs 8 --calibration " + profile;
  const auto eager = run_cli(job + " --json");
  const auto graphs = run_cli(job + " --stack " + stack + " --json");
  REQUIRE_MESSAGE(eager.exit_code == 0, eager.err);
  REQUIRE_MESSAGE(graphs.exit_code == 0, graphs.err);
  const auto e = json::parse(eager.out), g = json::parse(graphs.out);
  CHECK(e["host_wait_s"].get<double>() > 0.25 * e["step_time_s"].get<double>());
  CHECK(g["host_wait_s"].get<double>() < 0.25 * e["host_wait_s"].get<double>());
  CHECK(g["step_time_s"].get<double>() < e["step_time_s"].get<double>());
  const auto text = run_cli(job + " --stack " + stack);
  REQUIRE_MESSAGE(text.exit_code == 0, text.err);
  CHECK(text.out.find("# stack: megatron-graphs (TP overlap off, interference modelled, CUDA "
                      "graphs per layer)") != std::string::npos);
  std::filesystem::remove(stack);
  std::filesystem::remove(profile);
}

TEST_CASE("train: a stack file's fp8_tp_all_gathers halves FP8 TP gathers; a bad value is exit 2") {
  // Llama 3.1 8B FP8 on TP 8: the bundled megatron stack gathers in FP8; the same stack with
  // the key off gathers 16 bits, so its TP bytes grow by the six all-gathers' half.
  const auto stack =
      (std::filesystem::temp_directory_path() / "meshsim_megatron_bf16_gathers.json").string();
  auto doc = json::parse(std::ifstream(source_path("workloads/stacks/megatron.json")));
  doc["fp8_tp_all_gathers"] = false;
  std::ofstream(stack) << doc.dump();
  const std::string job = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --mesh tp=8 --seq 4096 --gbs 1 --dtype fp8 --json";
  const auto fp8 = run_cli(job);
  const auto wide = run_cli(job + " --stack " + stack);
  REQUIRE_MESSAGE(fp8.exit_code == 0, fp8.err);
  REQUIRE_MESSAGE(wide.exit_code == 0, wide.err);
  const auto tp_bytes = [](const std::string& out) {
    return json::parse(out)["comm_bytes_per_gpu"]["tp"].get<double>();
  };
  CHECK(tp_bytes(wide.out) - tp_bytes(fp8.out) ==
        doctest::Approx(6 * 32 * (7.0 / 8 * 4096 * 4096 * 2) / 2));
  doc["fp8_tp_all_gathers"] = "yes";
  std::ofstream(stack) << doc.dump();
  const auto bad = run_cli(job + " --stack " + stack);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.starts_with("error: " + stack + ":/fp8_tp_all_gathers: "));
  CHECK(bad.err.find('\n') == bad.err.size() - 1);
  std::filesystem::remove(stack);
}

namespace {

// A bundled stack without its `fp8_casts`, written to a temporary file.
struct StackWithoutCasts {
  std::string path;
  json doc;
};
StackWithoutCasts stack_without_casts(const std::string& name) {
  StackWithoutCasts s{
      (std::filesystem::temp_directory_path() / ("meshsim_" + name + "_no_casts.json")).string(),
      json::parse(std::ifstream(source_path("workloads/stacks/" + name + ".json")))};
  s.doc.erase("fp8_casts");
  std::ofstream(s.path) << s.doc.dump();
  return s;
}

// `job` (ending in "--dtype ") in FP8 on the bundled stack `name` against the same stack without
// its casts: the compute grows by at least `bytes` at the H100's 3.35 TB/s (less a fifth for
// the smaller kernels' L2 reads) and by less than at half of it plus 10 µs for each of
// `kernels`; a 16-bit run does not change.
void check_cast_growth(const std::string& job, const std::string& name, const std::string& without,
                       double bytes, double kernels) {
  const auto compute = [](const std::string& cmd) {
    const auto r = run_cli(cmd);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out)["compute_s"].get<double>();
  };
  const double grown =
      compute(job + "fp8 --stack " + name) - compute(job + "fp8 --stack " + without);
  CHECK(grown > 0.8 * bytes / 3.35e12);
  CHECK(grown < bytes / (0.5 * 3.35e12) + kernels * 10e-6);
  CHECK(compute(job + "bf16 --stack " + name) == compute(job + "bf16 --stack " + without));
}

}  // namespace

TEST_CASE("train: a stack file's fp8_casts add Transformer Engine's quantization kernels") {
  // Llama 3.1 8B FP8 on TP 8 with SP, 4096 tokens: the bundled megatron stack quantizes around
  // every GEMM; the same stack without `fp8_casts` does not. Per layer the casts move (bytes,
  // derived in tests/stack): forward 2·4096·4096 (QKV), 4·4096·512 (out), 2·4096·4096 (FC1),
  // 4·4096·1792 (FC2); dgrad 4·4096·768 (QKV), 3·512·4096 + 2·4096·4096 (out), 4·4096·3584
  // (FC1), 3·512·4096 + 2·4096·4096 (FC2): 255,852,544 B in 14 kernels, 32 layers.
  auto stack = stack_without_casts("megatron");
  const std::string job = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                          source_path("workloads/models/llama3.1-8b.json") +
                          " --mesh tp=8 --seq 4096 --gbs 1 --json --dtype ";
  check_cast_growth(job, "megatron", stack.path, 255852544.0 * 32, 14 * 32);
  stack.doc["fp8_casts"] = {{"out_proj", {{"input", "cast_transpose"}, {"output_grad", "twice"}}}};
  std::ofstream(stack.path) << stack.doc.dump();
  const auto bad = run_cli(job + "fp8 --stack " + stack.path);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.starts_with("error: " + stack.path +
                            ":/fp8_casts/out_proj/output_grad: unknown FP8 cast"));
  CHECK(bad.err.find('\n') == bad.err.size() - 1);
  std::filesystem::remove(stack.path);
}

TEST_CASE("train: torchtitan's fp8_casts add torchao's dynamic-scaling kernels") {
  // Llama 3.1 8B FP8 on FSDP 8, 4096 tokens a GPU, no recompute, torchtitan-compile: each block
  // linear's weight (K × N: 4096·6144 + 4096·4096 + 4096·28672 + 14336·4096 = 218,103,808
  // elements) and input (4096 · (3·4096 + 14336) = 109,051,904) before the forward GEMM and its
  // output gradient (4096 · (6144 + 4096 + 28672 + 4096) = 176,160,768) before dgrad, each an
  // amax pass (2 B) and a cast writing the FP8 copy and its transpose (4 B): 6 B an element,
  // 3,019,898,880 B a layer in 24 kernels, 32 layers.
  const auto stack = stack_without_casts("torchtitan-compile");
  check_cast_growth("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                        source_path("workloads/models/llama3.1-8b.json") +
                        " --mesh dp=8 --zero 3 --seq 4096 --gbs 8 --recompute none --json --dtype ",
                    "torchtitan-compile", stack.path, 3019898880.0 * 32, 24 * 32);
  std::filesystem::remove(stack.path);
}

TEST_CASE("train: --ep-dispatch deepep sends a token across to each node once") {
  // DeepSeek-V3 (node-limited routing: 4 of 8 groups) with EP 16 over 2 of 4 DGX H100 nodes: a
  // node holds 4 groups, so a token reaches the other node at most once where the plain
  // all-to-all sends it 4 copies on average.
  const std::string base = "train --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 4 --workload " +
                           source_path("workloads/models/deepseek-v3.json") + " --allow-oom --json";
  auto run = [&](const std::string& flags) {
    const auto r = run_cli(base + flags);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const std::string mesh = " --mesh pp=2,dp=16,ep=16 --zero 1 --seq 1024 --gbs 16";
  const auto plain = run(mesh);
  const auto deepep = run(mesh + " --ep-dispatch deepep");
  CHECK(plain["stack"] == "megatron");
  CHECK(deepep["stack"] == "megatron +deepep");
  CHECK(deepep["exposed_comm_s"]["ep"].get<double>() <
        0.5 * plain["exposed_comm_s"]["ep"].get<double>());
  CHECK(deepep["step_time_s"].get<double>() < plain["step_time_s"].get<double>());
  // A Megatron line's DeepEP switch runs the same stack.
  const auto line =
      run(" --from-megatron \"--pipeline-model-parallel-size 2 --expert-model-parallel-size 16 "
          "--seq-length 1024 --micro-batch-size 1 --global-batch-size 16 --bf16 "
          "--use-distributed-optimizer --moe-token-dispatcher-type flex --moe-enable-deepep\"");
  CHECK(line["stack"] == "megatron +deepep");
  CHECK(line["step_time_s"] == deepep["step_time_s"]);
  const auto bad = run_cli(base + mesh + " --ep-dispatch pplx");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "error: --ep-dispatch: 'pplx': expected all_to_all or deepep\n");
}

TEST_CASE("train: a model's bad routing groups are one error line naming the file and key") {
  const auto file = (std::filesystem::temp_directory_path() / "meshsim_bad_groups.json").string();
  std::ofstream(file) << R"({"model_type": "deepseek_v3", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 10,
      "intermediate_size": 8, "hidden_act": "silu", "moe_intermediate_size": 8,
      "n_routed_experts": 32, "num_experts_per_tok": 4, "n_group": 3, "topk_group": 1,
      "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8})";
  const auto r = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                         file + " --mesh dp=8,ep=8 --seq 1024");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + file + ":/n_group: must divide n_routed_experts (32)\n");
  std::filesystem::remove(file);
}

TEST_CASE("train --schedule 1f1b-overlap: Mixtral's all-to-alls under the other pass's compute") {
  const std::string base = "train --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 2 --workload " +
                           source_path("workloads/models/mixtral-8x7b.json") +
                           " --mesh ep=8,dp=16 --zero 3 --seq 4096 --gbs 64 --recompute full "
                           "--json --schedule ";
  const auto plain = run_cli(base + "1f1b");
  const auto merged = run_cli(base + "1f1b-overlap");
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
  REQUIRE_MESSAGE(merged.exit_code == 0, merged.err);
  const auto p = json::parse(plain.out), m = json::parse(merged.out);
  CHECK(m["schedule"] == "1f1b-overlap");
  CHECK(m["exposed_comm_s"]["ep"].get<double>() < 0.6 * p["exposed_comm_s"]["ep"].get<double>());
  CHECK(m["step_time_s"].get<double>() < p["step_time_s"].get<double>());
  CHECK(m["memory"]["activations"].get<double>() > p["memory"]["activations"].get<double>());
  const auto piped = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                             source_path("workloads/models/mixtral-8x7b.json") +
                             " --mesh ep=4,pp=2,dp=4 --seq 4096 --gbs 16 --schedule 1f1b-overlap");
  CHECK(piped.exit_code == 2);
  CHECK(piped.err.starts_with("error: --schedule: 1f1b-overlap needs pp = 1"));
}

TEST_CASE("train --pipeline-steps: torchtitan's gradient accumulation under PP, flag or config") {
  // Llama 3.1 8B on one DGX H100, pp = 2, dp = 4, 8 micro-batches per rank as 2 local batches of
  // 4 (torchtitan runs its pipeline schedule once per local batch).
  const std::string base = " --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") + " --json";
  const std::string flags = base +
                            " --mesh pp=2,dp=4 --seq 4096 --gbs 32 --zero 3 --stack torchtitan "
                            "--reshard-after-forward off --recompute none";
  auto run = [&](const std::string& args) {
    const auto r = run_cli("train" + args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const auto one = run(flags), two = run(flags + " --pipeline-steps 2");
  CHECK(two["step_time_s"].get<double>() > one["step_time_s"].get<double>());
  CHECK(two["bubble_fraction"].get<double>() > one["bubble_fraction"].get<double>());
  CHECK(two["comm_bytes_per_gpu"]["dp"].get<double>() ==
        doctest::Approx(2 * one["comm_bytes_per_gpu"]["dp"].get<double>()));
  CHECK(two["notes"].back() ==
        "the step's 8 micro-batches run as 2 pipeline schedules of 4, each with its own fill, "
        "drain and gradient sync");
  // The same job as torchtitan's config says it: global 32 = 2 × local 4 × dp 4.
  const auto toml = (std::filesystem::temp_directory_path() / "meshsim_accumulate.toml").string();
  std::ofstream(toml) << "[training]\nglobal_batch_size = 32\nlocal_batch_size = 4\n"
                         "seq_len = 4096\n[parallelism]\npipeline_parallel_degree = 2\n"
                         "[activation_checkpoint]\nmode = \"none\"\n";
  const auto from = run(base + " --from-torchtitan " + toml);
  std::filesystem::remove(toml);
  CHECK(from["step_time_s"].get<double>() == doctest::Approx(two["step_time_s"].get<double>()));
  // Errors: one line, exit 2.
  const auto odd = run_cli("train" + flags + " --pipeline-steps 3");
  CHECK(odd.exit_code == 2);
  CHECK(odd.err ==
        "error: --pipeline-steps: 3 pipeline schedules do not divide the 8 micro-batches per "
        "step\n");
  const auto no_pp =
      run_cli("train" + base + " --mesh dp=8 --seq 4096 --gbs 16 --zero 3 --pipeline-steps 2");
  CHECK(no_pp.exit_code == 2);
  CHECK(no_pp.err ==
        "error: --pipeline-steps: runs the step as 2 pipeline schedules; it needs pp > 1\n");
  // memory: GPipe holds one pipeline step's micro-batches.
  auto activations = [&](const std::string& steps) {
    const auto r = run_cli("memory" + flags + " --schedule gpipe --pipeline-steps " + steps);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out)["per_gpu_bytes"]["activations"].get<double>();
  };
  CHECK(activations("2") == doctest::Approx(activations("1") / 2));
}

TEST_CASE("train --schedule interleaved:V:G: Megatron's micro-batch groups, its rules") {
  // Llama 3.1 8B on one DGX H100, pp = 4, 9 micro-batches: not a multiple of pp, so the default
  // group refuses it; groups of 5 (then 4) run it.
  const std::string base = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh pp=4,dp=2 --seq 4096 --gbs 18 --json --schedule ";
  const auto plain = run_cli(base + "interleaved:2");
  CHECK(plain.exit_code == 2);
  CHECK(plain.err ==
        "error: --schedule: interleaved 1F1B needs the micro-batches per step (9) to be a "
        "multiple of pp = 4 (as Megatron-LM requires)\n");
  const auto grouped = run_cli(base + "interleaved:2:5");
  REQUIRE_MESSAGE(grouped.exit_code == 0, grouped.err);
  const auto g = json::parse(grouped.out);
  CHECK(g["schedule"] == "interleaved:2:5");
  CHECK(g["step_time_s"].get<double>() > 0);
  const auto short_last = run_cli(base + "interleaved:2:6");
  CHECK(short_last.exit_code == 2);
  CHECK(short_last.err ==
        "error: --schedule: groups of 6 leave a last group of 3 of the 9 micro-batches per step, "
        "fewer than pp = 4 (as Megatron-LM refuses)\n");
  // torchtitan's Interleaved1F1B over 10 micro-batches on 4 stages: 2 rounds of 5.
  const auto toml = (std::filesystem::temp_directory_path() / "meshsim_rounds.toml").string();
  std::ofstream(toml) << "[training]\nlocal_batch_size = 10\nseq_len = 4096\n[parallelism]\n"
                         "pipeline_parallel_degree = 4\n"
                         "pipeline_parallel_schedule = \"Interleaved1F1B\"\n";
  const auto titan = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                             source_path("workloads/models/llama3.1-8b.json") +
                             " --json --from-torchtitan " + toml);
  std::filesystem::remove(toml);
  REQUIRE_MESSAGE(titan.exit_code == 0, titan.err);
  CHECK(json::parse(titan.out)["schedule"] == "interleaved:2:5");
}

TEST_CASE("train --schedule interleaved-overlap:2: Mixtral's all-to-alls hidden on a pipeline") {
  const std::string base = "train --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 2 --workload " +
                           source_path("workloads/models/mixtral-8x7b.json") +
                           " --mesh ep=8,pp=2,dp=8 --zero 1 --seq 4096 --gbs 64 --recompute full "
                           "--json --schedule ";
  const auto plain = run_cli(base + "interleaved:2");
  const auto merged = run_cli(base + "interleaved-overlap:2");
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
  REQUIRE_MESSAGE(merged.exit_code == 0, merged.err);
  const auto p = json::parse(plain.out), m = json::parse(merged.out);
  CHECK(m["schedule"] == "interleaved-overlap:2");
  CHECK(m["exposed_comm_s"]["ep"].get<double>() < 0.6 * p["exposed_comm_s"]["ep"].get<double>());
  CHECK(m["step_time_s"].get<double>() < p["step_time_s"].get<double>());
  CHECK(m["bubble_s"].get<double>() <= p["bubble_s"].get<double>() * 1.05);
  CHECK(m["memory"]["activations"].get<double>() == p["memory"]["activations"].get<double>());
  // The same job from a Megatron line with Megatron-Core's EP-overlap flag.
  const auto line = run_cli(
      "train --topology " + topology_path("dgx-h100-superpod.json") + " --nodes 2 --workload " +
      source_path("workloads/models/mixtral-8x7b.json") +
      " --json --from-megatron \"--pipeline-model-parallel-size 2 --expert-model-parallel-size 8 "
      "--num-layers-per-virtual-pipeline-stage 8 --overlap-moe-expert-parallel-comm "
      "--seq-length 4096 --global-batch-size 64 --micro-batch-size 1 --use-distributed-optimizer "
      "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --bf16\"");
  REQUIRE_MESSAGE(line.exit_code == 0, line.err);
  const auto l = json::parse(line.out);
  CHECK(l["schedule"] == "interleaved-overlap:2");
  CHECK(l["step_time_s"] == m["step_time_s"]);
  const auto one = run_cli(base + "interleaved-overlap:1");
  CHECK(one.exit_code == 2);
  CHECK(one.err ==
        "error: --schedule: 'interleaved-overlap:1': the overlapped interleaved schedule needs 2 "
        "or more virtual stages (without PP, 1f1b-overlap)\n");
}

TEST_CASE("train: Megatron's --recompute-modules, from the flag or a launch line") {
  // DeepSeek-V3 on 4 DGX H100 nodes: MLA and MoE layers, where layernorm, moe_act and
  // mla_up_proj each free a tensor and re-run a cheap op.
  const std::string base = "train --topology " + topology_path("dgx-h100-superpod.json") +
                           " --nodes 4 --workload " +
                           source_path("workloads/models/deepseek-v3.json") + " --allow-oom";
  auto run = [&](const std::string& flags) {
    const auto r = run_cli(base + " --json" + flags);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const std::string mesh = " --mesh pp=2,dp=16,ep=16 --zero 1 --seq 1024 --gbs 16";
  const auto none = run(mesh + " --recompute none");
  const auto modules = run(mesh + " --recompute-modules moe_act,layernorm,mla_up_proj");
  CHECK(modules["recompute"] == "selective");
  CHECK(modules["recompute_modules"] == json::array({"moe_act", "layernorm", "mla_up_proj"}));
  CHECK(none["recompute_modules"] == json::array());
  CHECK(modules["memory"]["activations"].get<double>() <
        none["memory"]["activations"].get<double>());
  CHECK(modules["step_time_s"].get<double>() > none["step_time_s"].get<double>());
  const auto line = run(
      " --from-megatron \"--pipeline-model-parallel-size 2 --expert-model-parallel-size 16 "
      "--seq-length 1024 --micro-batch-size 1 --global-batch-size 16 --bf16 "
      "--use-distributed-optimizer --recompute-granularity selective --recompute-modules moe_act "
      "layernorm mla_up_proj --data-path 0.5 /data/a 0.5 /data/b\"");
  CHECK(line["recompute_modules"] == modules["recompute_modules"]);
  CHECK(line["step_time_s"] == modules["step_time_s"]);
  const auto text = run_cli(base + mesh + " --recompute-modules moe_act,layernorm");
  CHECK(text.out.find("recompute selective (moe_act, layernorm);") != std::string::npos);

  // The mlp checkpoint re-runs its TP all-gather and reduce-scatter of 4096 × 4096 × 2 bytes,
  // each sending (t − 1)/t of it per GPU, per layer and micro-batch (32 layers, 1 micro-batch
  // per DP rank of 4).
  const auto tp_run = [&](const std::string& names) {
    const auto r = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh tp=2 --seq 4096 --gbs 4 --recompute-modules " + names +
                           " --zero 1 --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const auto attn_only = tp_run("core_attn");
  const auto with_mlp = tp_run("core_attn,mlp");
  CHECK(with_mlp["notes"] == json::array());
  CHECK(with_mlp["comm_bytes_per_gpu"]["tp"].get<double>() -
            attn_only["comm_bytes_per_gpu"]["tp"].get<double>() ==
        doctest::Approx(32 * 2 * 4096.0 * 4096 * 2 / 2));
  CHECK(with_mlp["step_time_s"].get<double>() > attn_only["step_time_s"].get<double>());
  // A module that acts on no layer of the model recomputes nothing, and both commands say so.
  const auto idle = tp_run("core_attn,moe");
  CHECK(idle["notes"] == json::array({"recompute module 'moe' acts on no layer of llama3.1-8b "
                                      "(its regions need router)"}));
  CHECK(idle["step_time_s"] == attn_only["step_time_s"]);
  const auto mem = run_cli("memory --gpu H100-SXM5-80GB --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh tp=2,dp=4 --seq 4096 --recompute-modules layernorm");
  REQUIRE_MESSAGE(mem.exit_code == 0, mem.err);
  CHECK(
      mem.out.ends_with("\nnote: recompute module 'layernorm' acts on no layer of llama3.1-8b "
                        "(its regions need kv_down_proj or router)\n"));

  for (const auto& [flags, error] : std::vector<std::pair<std::string, std::string>>{
           {" --recompute-modules moe_layer",
            "error: --recompute-modules: stack 'megatron' has no recompute module 'moe_layer' "
            "(its modules: core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, "
            "shared_experts)\n"},
           {" --recompute full --recompute-modules mlp",
            "error: --recompute-modules: needs --recompute selective (or no --recompute)\n"}}) {
    const auto bad = run_cli(base + mesh + flags);
    CHECK(bad.exit_code == 2);
    CHECK(bad.err == error);
  }
  // torchtitan (ZeRO-3 here: it has no ZeRO-1) has no modules to name.
  const auto titan = run_cli(base +
                             " --mesh pp=2,dp=16,ep=16 --zero 3 --seq 1024 --gbs 16 --stack "
                             "torchtitan --recompute-modules mlp");
  CHECK(titan.exit_code == 2);
  CHECK(titan.err == "error: --recompute-modules: stack 'torchtitan' has no recompute modules\n");
}

TEST_CASE("train: Megatron's block and uniform recompute methods") {
  // Llama 3.1 8B (32 layers) with PP 2 on one DGX H100: 17 and 15 layers (balanced by time).
  const std::string base = "train --topology " + topology_path("dgx-h100.json") + " --workload " +
                           source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh tp=2,pp=2 --seq 4096 --gbs 16 --json";
  auto run = [&](const std::string& flags) {
    const auto r = run_cli(base + flags);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const auto none = run(" --recompute none");
  const auto full = run(" --recompute full");
  const auto block4 = run(" --recompute full --recompute-method block --recompute-num-layers 4");
  // A block as long as the longer stage is full recompute; a shorter one recomputes less and
  // keeps more.
  CHECK(
      run(" --recompute full --recompute-method block --recompute-num-layers 17")["step_time_s"] ==
      full["step_time_s"]);
  CHECK(block4["step_time_s"].get<double>() < full["step_time_s"].get<double>());
  CHECK(block4["step_time_s"].get<double>() > none["step_time_s"].get<double>());
  CHECK(block4["memory"]["activations"].get<double>() >
        full["memory"]["activations"].get<double>());
  // Uniform groups recompute every layer (the same step) and keep fewer checkpoints.
  const auto uniform4 =
      run(" --recompute-method uniform --recompute-num-layers 4 --recompute full");
  CHECK(uniform4["step_time_s"] == full["step_time_s"]);
  CHECK(uniform4["memory"]["activations"].get<double>() <
        full["memory"]["activations"].get<double>());
  // A launch line's method gives the same step; the header names it.
  const auto line = run_cli(
      "train --topology " + topology_path("dgx-h100.json") + " --workload " +
      source_path("workloads/models/llama3.1-8b.json") +
      " --json --from-megatron \"--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
      "--sequence-parallel --seq-length 4096 --micro-batch-size 1 --global-batch-size 16 --bf16 "
      "--recompute-granularity full --recompute-method block --recompute-num-layers 4\"");
  REQUIRE_MESSAGE(line.exit_code == 0, line.err);
  CHECK(json::parse(line.out)["step_time_s"] == block4["step_time_s"]);
  const auto text = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                            source_path("workloads/models/llama3.1-8b.json") +
                            " --mesh tp=2,pp=2 --seq 4096 --gbs 16 --recompute full "
                            "--recompute-method block --recompute-num-layers 4");
  CHECK(text.out.find("recompute full (block 4);") != std::string::npos);
  const auto bad = run_cli(base + " --recompute selective --recompute-method block");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "error: --recompute-method: a recompute method needs full recompute of every "
        "layer\n");
}

TEST_CASE("train --tune-split runs the split search would, and says which switches give it") {
  const auto run = train_8b_json;
  using V = std::vector<std::int64_t>;
  const std::string flags = " --mesh pp=2 --seq 4096 --gbs 64 --zero 1";
  const auto own = run(flags);
  const auto tuned = run(flags + " --tune-split");
  CHECK(own["stage_layers"].get<V>() == V{16, 16});
  const auto chunks = tuned["stage_layers"].get<V>();
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0] > 16);
  CHECK(tuned["step_time_s"].get<double>() < own["step_time_s"].get<double>());
  bool named = false;
  for (const auto& n : tuned["notes"])
    named =
        named || n.get<std::string>().find(fmt::format(
                     "--decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers "
                     "{}",
                     chunks[0], chunks[1])) != std::string::npos;
  CHECK(named);
  // The same step as that split given by hand.
  CHECK(tuned["step_time_s"] ==
        run(flags + fmt::format(" --stage-layers {},{}", chunks[0], chunks[1]))["step_time_s"]);
  const auto both = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                            source_path("workloads/models/llama3.1-8b.json") + flags +
                            " --tune-split --stage-layers 16,16");
  CHECK(both.exit_code == 2);
  CHECK(both.err == "error: --tune-split: --stage-layers gives the split; leave one of them out\n");
}
