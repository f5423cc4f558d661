#include "report/torchtitan_config.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "error_of.hpp"
#include "launch_layout_check.hpp"
#include "model/model_loader.hpp"
#include "strategy/pipeline_split.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::error_of;
using meshsim::test::model_path;

TEST_CASE("an emitted torchtitan config reads back as the same layout and job") {
  struct Layout {
    const char* model;
    const char* mesh;
    std::int32_t zero;
    bool reshard;
    Recompute recompute;
    Schedule schedule;
    DType dtype;
  };
  const Layout layouts[] = {
      {"llama3.1-8b", "dp=8", 0, true, Recompute::none, {}, DType::bf16},
      {"llama3.1-70b", "dp=64,tp=8", 3, true, Recompute::full, {}, DType::bf16},
      {"llama3.1-70b", "dp=128,tp=4,fsdp=16", 3, false, Recompute::selective, {}, DType::fp8},
      {"llama3.1-70b",
       "dp=16,tp=8,pp=4",
       3,
       true,
       Recompute::none,
       {ScheduleKind::interleaved, 5},
       DType::bf16},
      {"llama3.1-405b",
       "dp=16,tp=8,pp=8,cp=2",
       3,
       true,
       Recompute::full,
       {ScheduleKind::gpipe, 1},
       DType::fp16},
      {"deepseek-v3",
       "dp=64,pp=8,ep=64",
       3,
       true,
       Recompute::full,
       {ScheduleKind::zero_bubble, 1},
       DType::bf16},
  };
  for (const auto& l : layouts) {
    const auto model = load_model(model_path(l.model));
    ParallelConfig c;
    c.mesh = parse_mesh(l.mesh, "--mesh");
    c.zero = l.zero;
    c.reshard_after_forward = l.reshard;
    c.sp = c.mesh.tp > 1;
    c.recompute = l.recompute;
    c.schedule = l.schedule;
    const LaunchJob job{8192, 1024, 2, l.dtype, c.mesh.world() / 8, 8};
    const auto text = launch_config("torchtitan", model, c, job);
    const std::string context = std::string(l.model) + " " + l.mesh + "\n" + text;
    INFO(context);
    const auto back = parse_torchtitan_toml(text, c.mesh.world(), model.layers, "config.toml");
    CHECK(back.ignored.empty());
    meshsim::test::check_same_layout(back.layout, c, job);
  }
  // torchtitan's layer SAC (every second block in full AC) is selective_ac_option "2".
  {
    const auto model = load_model(model_path("llama3.1-8b"));
    ParallelConfig c;
    c.mesh = parse_mesh("dp=8", "--mesh");
    c.zero = 3;
    c.recompute = Recompute::full;
    c.recompute_every = 2;
    const LaunchJob job{4096, 8, 1, DType::bf16, 1, 8};
    const auto text = launch_config("torchtitan", model, c, job);
    CHECK(text.find("mode = \"selective\"\nselective_ac_option = \"2\"\n") != std::string::npos);
    const auto back = parse_torchtitan_toml(text, 8, model.layers, "config.toml");
    CHECK(back.ignored.empty());
    meshsim::test::check_same_layout(back.layout, c, job);
    // Megatron has no such policy: its line says what it runs instead.
    CHECK(launch_config("megatron", model, c, job)
              .starts_with("# meshsim recomputed one layer in 2; Megatron's uniform full "
                           "recompute (below) re-runs every layer\n"));
  }
  // The bundled Llama 3.1 models are torchtitan flavors; others get a comment to register one.
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8", "--mesh");
  const LaunchJob job{4096, 8, 1, DType::bf16, 1, 8};
  CHECK(launch_config("torchtitan", load_model(model_path("llama3.1-70b")), c, job)
            .starts_with("[model]\nname = \"llama3\"\nflavor = \"70B\"\n"));
  CHECK(launch_config("torchtitan", load_model(model_path("mixtral-8x7b")), c, job)
            .starts_with("# torchtitan registers no flavor of mixtral-8x7b"));
  // ZeRO-2 has no torchtitan form: FSDP2 without resharding, said in a comment.
  c.zero = 2;
  const auto z2 = launch_config("torchtitan", load_model(model_path("llama3.1-8b")), c, job);
  CHECK(z2.starts_with("# torchtitan shards with FSDP2 (ZeRO-3) or not at all: ZeRO-2"));
  const auto back = parse_torchtitan_toml(z2, 8, 32, "x");
  CHECK(back.layout.config.zero == 3);
  CHECK_FALSE(back.layout.config.reshard_after_forward);
}

TEST_CASE("a user's torchtitan config: defaults, -1 shard degree, unread keys") {
  // The shape of torchtitan's train_configs/llama3_8b.toml.
  const std::string toml = R"(# torchtitan Config.toml
[job]
dump_folder = "./outputs"
description = "Llama 3 8B training"

[model]
name = "llama3"
flavor = "8B"
hf_assets_path = "./assets/hf/Llama-3.1-8B"

[optimizer]
name = "AdamW"
lr = 3e-4

[training]
local_batch_size = 1
seq_len = 8192
steps = 1000

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
pipeline_parallel_degree = 1
context_parallel_degree = 1

[activation_checkpoint]
mode = "selective"  # ["none", "selective", "full"]
selective_ac_option = "op"
)";
  const auto t = parse_torchtitan_toml(toml, 64, 32, "llama3_8b.toml");
  CHECK(t.model_name == "llama3");
  CHECK(t.flavor == "8B");
  CHECK(t.layout.config.mesh == Mesh{64, 1, 1, 1, 1});  // shard -1: every GPU
  CHECK(t.layout.config.zero == 3);
  CHECK(t.layout.config.recompute == Recompute::selective);
  CHECK(t.layout.job.global_batch == 64);  // local 1 × dp 64
  CHECK(t.layout.job.micro_batch == 1);
  CHECK(t.layout.job.seq == 8192);
  CHECK(t.layout.job.dtype == DType::bf16);
  CHECK(t.ignored == std::vector<std::string>{"job.description", "job.dump_folder",
                                              "model.hf_assets_path", "optimizer.lr",
                                              "optimizer.name", "training.steps"});
}

TEST_CASE("fsdp_reshard_after_forward \"default\" keeps gathered weights with PP") {
  // torchtitan apply_fsdp: "default" reshards after forward unless PP is on.
  const auto read = [](int pp, const char* policy) {
    std::string toml = fmt::format(R"([parallelism]
data_parallel_shard_degree = -1
pipeline_parallel_degree = {}
)",
                                   pp);
    if (policy) toml += fmt::format("fsdp_reshard_after_forward = \"{}\"\n", policy);
    return parse_torchtitan_toml(toml, 64, 32, "r.toml").layout.config.reshard_after_forward;
  };
  CHECK(read(1, nullptr));
  CHECK_FALSE(read(4, nullptr));
  CHECK_FALSE(read(4, "default"));
  CHECK(read(4, "always"));
  CHECK_FALSE(read(1, "never"));
}

TEST_CASE("torchtitan's gradient accumulation under PP: one pipeline schedule per local batch") {
  const auto read = [](int global, int local, int mbs) {
    const std::string toml = fmt::format(R"([training]
global_batch_size = {}
local_batch_size = {}
seq_len = 4096
[parallelism]
data_parallel_shard_degree = -1
pipeline_parallel_degree = 4
pipeline_parallel_microbatch_size = {}
)",
                                         global, local, mbs);
    return parse_torchtitan_toml(toml, 64, 32, "acc.toml").layout.job;
  };
  // dp = 16: 256 sequences are 2 local batches of 8 per rank, each 4 micro-batches of 2.
  const auto j = read(256, 8, 2);
  CHECK(j.pipeline_steps == 2);
  CHECK(j.micro_batch == 2);
  CHECK(j.global_batch == 256);
  CHECK(read(128, 8, 2).pipeline_steps == 1);
  CHECK(error_of([&] { read(256, 8, 3); }) ==
        "acc.toml: line 8: local_batch_size 8 is not a multiple of "
        "pipeline_parallel_microbatch_size 3");
  // Written back: local_batch_size is one pipeline step's batch.
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=16,pp=4", "--mesh");
  c.zero = 3;
  c.reshard_after_forward = false;
  LaunchJob job{4096, 256, 2, DType::bf16, 8, 8};
  job.pipeline_steps = 2;
  const auto text = launch_config("torchtitan", model, c, job);
  CHECK(text.find("local_batch_size = 8\n") != std::string::npos);
  const auto back = parse_torchtitan_toml(text, 64, model.layers, "config.toml");
  CHECK(back.ignored.empty());
  meshsim::test::check_same_layout(back.layout, c, job);
  // Megatron runs every micro-batch in one schedule, and its line says so.
  CHECK(launch_config("megatron", model, c, job)
            .starts_with("# meshsim ran the step as 2 pipeline schedules (torchtitan's gradient "
                         "accumulation); Megatron-LM runs all its micro-batches in one\n"));
}

TEST_CASE("torchtitan's Interleaved1F1B rounds are Megatron's micro-batch groups") {
  // 64 GPUs, pp = 4, dp = 16, 32 layers: n = local_batch_size micro-batches of one sequence run
  // in max(1, n // 4) rounds of n / rounds.
  const auto read = [](int local) {
    const std::string toml = fmt::format(R"([training]
local_batch_size = {}
seq_len = 4096
[parallelism]
data_parallel_shard_degree = -1
pipeline_parallel_degree = 4
pipeline_parallel_schedule = "Interleaved1F1B"
pipeline_parallel_microbatch_size = 1
)",
                                         local);
    return parse_torchtitan_toml(toml, 64, 32, "pp.toml").layout.config.schedule;
  };
  CHECK(to_string(read(8)) == "interleaved:2");     // 2 rounds of 4: pp, the default
  CHECK(to_string(read(10)) == "interleaved:2:5");  // 2 rounds of 5
  CHECK(to_string(read(6)) == "interleaved:2:6");   // 1 round of 6
  CHECK(to_string(read(3)) == "interleaved:2");     // fewer than pp: the default, refused later
  // Emitted: a group torchtitan's rounds give back needs no note; another one says so.
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=2,pp=4", "--mesh");
  const LaunchJob job{4096, 20, 1, DType::bf16, 1, 8};  // 10 micro-batches
  const std::string note = "# meshsim ran micro-batch groups of";
  c.schedule = {ScheduleKind::interleaved, 2, false, 5};
  CHECK(launch_config("torchtitan", model, c, job).find(note) == std::string::npos);
  c.schedule.group = 10;
  CHECK(launch_config("torchtitan", model, c, job).find(note + " 10") != std::string::npos);
  CHECK(torchtitan_interleaved_group(10, 4) == 5);
  CHECK(torchtitan_interleaved_group(8, 4) == 0);
  CHECK(!torchtitan_interleaved_group(9, 4));
  CHECK(error_of([&] { read(9); }) ==
        "pp.toml: Interleaved1F1B runs 9 micro-batches (local_batch_size / "
        "pipeline_parallel_microbatch_size) in 2 rounds, which do not divide them (as "
        "torch.distributed.pipelining refuses)");
}

TEST_CASE("torchtitan configs meshsim cannot read are errors naming the line") {
  auto err = [](const std::string& toml, std::int64_t world = 64) {
    return error_of([&] { parse_torchtitan_toml(toml, world, 32, "c.toml"); });
  };
  CHECK(err("[parallelism]\ntensor_parallel_degree = 3\n") ==
        "c.toml: data_parallel_shard_degree = -1, and tp·pp·cp·replicate = 3 does not divide the "
        "cluster's 64 GPUs");
  CHECK(err("[parallelism]\ntensor_parallel_degree = eight\n") ==
        "c.toml: line 2: parallelism.tensor_parallel_degree = eight is not an integer of at "
        "least 1");
  CHECK(err("[parallelism]\ndata_parallel_shard_degree = 8\n") ==
        "c.toml: the degrees make 8 ranks, the cluster has 64 GPUs");
  CHECK(err("[parallelism]\npipeline_parallel_schedule = \"DualPipeV\"\n")
            .find("'DualPipeV': meshsim models") != std::string::npos);
  CHECK(err("[training]\nseq_len = 1\nseq_len = 2\n") ==
        "c.toml: line 3: training.seq_len is given twice");
  CHECK(err("[training\n") == "c.toml: line 1: malformed section header '[training'");
  CHECK(err("just words\n") == "c.toml: line 1: expected key = value, got 'just words'");
  CHECK(err("[model]\nname = \"llama3\n") == "c.toml: line 2: unterminated string for name");
  CHECK(err("[training]\nlocal_batch_size = 2\nglobal_batch_size = 100\n")
            .find("is not a multiple of local_batch_size 2") != std::string::npos);
  CHECK(err("[activation_checkpoint]\nmode = \"sometimes\"\n").find("'sometimes'") !=
        std::string::npos);
  CHECK(err("[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"0\"\n") ==
        "c.toml: activation_checkpoint.selective_ac_option '0': expected op or a positive integer");
  CHECK(err("[model]\nconverters = [\"float8\"]\n[float8]\nrecipe_name = \"rowwise\"\n") ==
        "c.toml: line 4: recipe_name 'rowwise': meshsim models torchao's tensorwise Float8 only "
        "(rowwise scaling has no stack form)");
  CHECK(err("[activation_checkpoint]\nselective_ac_option = \"often\"\n") ==
        "c.toml: activation_checkpoint.selective_ac_option 'often': expected op or a positive "
        "integer");
}

TEST_CASE("torchtitan's float8 converter: FP8 GEMMs with the tensorwise recipe") {
  const std::string base = "[training]\nseq_len = 4096\nlocal_batch_size = 1\n";
  const auto read = [&](const std::string& extra) {
    return parse_torchtitan_toml(base + extra, 8, 32, "c.toml");
  };
  CHECK(read("").layout.job.dtype == DType::bf16);
  CHECK(read("[model]\nconverters = [\"float8\"]\n").layout.job.dtype == DType::fp8);
  const auto tensorwise =
      read("[model]\nconverters = [\"float8\"]\n[float8]\nrecipe_name = \"tensorwise\"\n");
  CHECK(tensorwise.layout.job.dtype == DType::fp8);
  CHECK(std::ranges::find(tensorwise.ignored, "float8.recipe_name") == tensorwise.ignored.end());
  // Without the converter the [float8] section does nothing: its keys are listed as ignored.
  const auto unused = read("[float8]\nrecipe_name = \"rowwise\"\n");
  CHECK(unused.layout.job.dtype == DType::bf16);
  CHECK(std::ranges::find(unused.ignored, "float8.recipe_name") != unused.ignored.end());
  CHECK(!unused.layout.stack.fp8_fsdp_all_gather);
  // The MoE prototype (rowwise grouped GEMMs) is refused; an empty list is torchtitan's default
  // (routed experts in 16 bits, as the stacks price them) and is read.
  const auto no_moe =
      read("[model]\nconverters = [\"float8\"]\n[float8]\nmoe_fqns_prototype = []\n");
  CHECK(no_moe.layout.job.dtype == DType::fp8);
  CHECK(std::ranges::find(no_moe.ignored, "float8.moe_fqns_prototype") == no_moe.ignored.end());
  std::string message;
  try {
    read("[model]\nconverters = [\"float8\"]\n[float8]\nmoe_fqns_prototype = [\"experts\"]\n");
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message ==
        "c.toml: line 7: moe_fqns_prototype: torchao's float8 MoE training (rowwise scaling) is "
        "not modelled; without it the routed experts run in 16 bits, as the torchtitan stacks "
        "price them");
}

TEST_CASE("torchtitan's float8 all-gather: [float8] switches name the stack's FSDP gather") {
  const std::string base =
      "[training]\nseq_len = 4096\nlocal_batch_size = 1\n[model]\nconverters = [\"float8\"]\n";
  const auto gather = [&](const std::string& extra) {
    return parse_torchtitan_toml(base + extra, 8, 32, "c.toml").layout.stack.fp8_fsdp_all_gather;
  };
  // Said by enable alone (scales per weight in each pre-all-gather hook) and by both; precompute
  // alone does nothing in torchtitan's converter.
  CHECK(!gather(""));  // not said: the stack's own
  CHECK(gather("[float8]\nenable_fsdp_float8_all_gather = true\n") == Fp8FsdpAllGather::dynamic);
  CHECK(gather("[float8]\nenable_fsdp_float8_all_gather = true\n"
               "precompute_float8_dynamic_scale_for_fsdp = true\n") ==
        Fp8FsdpAllGather::precomputed);
  CHECK(gather("[float8]\nprecompute_float8_dynamic_scale_for_fsdp = true\n") ==
        Fp8FsdpAllGather::none);
  CHECK(error_of([&] { gather("[float8]\nenable_fsdp_float8_all_gather = \"yes\"\n"); }) ==
        "c.toml: line 7: float8.enable_fsdp_float8_all_gather = yes is not true or false");
  // Written back by the emitter for an FP8 job (and only then), and read back the same.
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8", "--mesh");
  c.zero = 3;
  LaunchJob job{4096, 8, 1, DType::fp8};
  for (const auto g : kAllFp8FsdpAllGather) {
    CAPTURE(std::string(name_of(g)));
    LaunchStack st;
    st.name = "torchtitan-compile";
    st.fp8_fsdp_all_gather = g;
    const auto text = launch_config("torchtitan", model, c, job, st);
    const auto back = parse_torchtitan_toml(text, 8, 32, "e.toml").layout.stack;
    CHECK(back.fp8_fsdp_all_gather.value_or(Fp8FsdpAllGather::none) == g);
    job.dtype = DType::bf16;
    CHECK(launch_config("torchtitan", model, c, job, st).find("[float8]") == std::string::npos);
    job.dtype = DType::fp8;
  }
}

TEST_CASE("a torchtitan config names its stack: compile, its loss, async TP") {
  const std::string base =
      "[parallelism]\ntensor_parallel_degree = 2\n[training]\nseq_len = 4096\n"
      "global_batch_size = 8\nlocal_batch_size = 1\n";
  const auto stack_of = [&](const std::string& extra) {
    return parse_torchtitan_toml(base + extra, 8, 32, "c.toml").layout.stack;
  };
  // Eager unless compiled.
  CHECK(stack_of("").name == "torchtitan");
  CHECK(!stack_of("").tp_overlap);
  CHECK(!stack_of("").fused_loss);
  // [compile] enable: its components default to the model and the loss.
  const auto compiled = stack_of("[compile]\nenable = true\n");
  CHECK(compiled.name == "torchtitan-compile");
  CHECK(compiled.fused_loss);
  CHECK(!stack_of("[compile]\nenable = true\ncomponents = [\"model\"]\n").fused_loss);
  CHECK(stack_of("[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n").fused_loss);
  CHECK(stack_of("[compile]\nenable = false\n").name == "torchtitan");
  // The older [training] compile compiled the blocks only.
  const auto older = stack_of("compile = true\n");  // still in [training]
  CHECK(older.name == "torchtitan-compile");
  CHECK(!older.fused_loss);
  // Async TP (in [parallelism]) needs compile.
  const auto async = parse_torchtitan_toml(
      "[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n"
      "[compile]\nenable = true\n",
      8, 32, "c.toml");
  CHECK(async.layout.stack.tp_overlap);
  CHECK(error_of([] {
          parse_torchtitan_toml("[parallelism]\nenable_async_tensor_parallel = true\n", 8, 32,
                                "c.toml");
        }) ==
        "c.toml: line 2: enable_async_tensor_parallel needs torch.compile ([compile] enable)");
  // CP's exchange: torchtitan's default rotate method all-gathers; alltoall is a ring.
  CHECK(stack_of("").cp_comm == CpComm::allgather);
  const auto cp_of = [&](const std::string& method) {
    return parse_torchtitan_toml(
               "[parallelism]\ncontext_parallel_degree = 2\n"
               "context_parallel_rotate_method = \"" +
                   method + "\"\n",
               8, 32, "c.toml")
        .layout.stack.cp_comm;
  };
  CHECK(cp_of("allgather") == CpComm::allgather);
  CHECK(cp_of("alltoall") == CpComm::ring);
  CHECK(error_of([&] { cp_of("ring"); }) ==
        "c.toml: line 3: context_parallel_rotate_method 'ring': expected allgather or alltoall");
  CHECK(error_of([&] { stack_of("[compile]\nenable = \"yes\"\n"); }) ==
        "c.toml: line 8: compile.enable = yes is not true or false");
}

TEST_CASE("torchtitan's stage split: the ends' weights and pipeline_parallel_layers_per_stage") {
  const std::string base =
      "[training]\nseq_len = 4096\nlocal_batch_size = 8\n[parallelism]\n"
      "pipeline_parallel_degree = 2\n";
  const auto layout_of = [&](const std::string& extra) {
    return parse_torchtitan_toml(base + extra, 2, 32, "c.toml").layout;
  };
  CHECK(!layout_of("").stack.pipeline_split);  // not said: the stack's own (1 and 1)
  CHECK(layout_of("pipeline_parallel_first_stage_less_layers = 0\n").stack.pipeline_split ==
        PipelineSplit{PipelineSplitMethod::even, 0, 1, false});
  // 32 layers + 2 = 34 units; 6 a stage make ceil(34 / 6) = 6 stages, 3 a rank.
  CHECK(to_string(layout_of("pipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                            "pipeline_parallel_layers_per_stage = 6\n")
                      .config.schedule) == "interleaved:3");
  CHECK(
      to_string(layout_of("pipeline_parallel_schedule = \"Interleaved1F1B\"\n").config.schedule) ==
      "interleaved:2");
  // 17 a stage: 2 stages, one a rank, as 1F1B runs.
  CHECK(to_string(layout_of("pipeline_parallel_layers_per_stage = 17\n").config.schedule) ==
        "1f1b");
  CHECK(error_of([&] {
          layout_of(
              "pipeline_parallel_schedule = \"Interleaved1F1B\"\n"
              "pipeline_parallel_layers_per_stage = 4\n");
        }) ==
        "c.toml: pipeline_parallel_layers_per_stage 4 makes 9 stages of 34 layers (with the "
        "ends' weights), not a multiple of pp 2");
  CHECK(error_of([&] { layout_of("pipeline_parallel_layers_per_stage = 9\n"); }) ==
        "c.toml: pipeline_parallel_layers_per_stage 9 gives 2 stages a rank; 1F1B runs one");
  CHECK(error_of([&] { layout_of("pipeline_parallel_last_stage_less_layers = 9\n"); }) ==
        "c.toml: line 6: parallelism.pipeline_parallel_last_stage_less_layers = 9: meshsim "
        "weighs an end at most 8 layers");
  // Written back by the emitter with the stack's weights, and the stages per rank where they
  // are not the default two; read back the same.
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("pp=2", "--mesh");
  c.schedule = {ScheduleKind::interleaved, 3};
  LaunchStack st;
  st.name = "torchtitan";
  st.pipeline_split = PipelineSplit{PipelineSplitMethod::even, 1, 1, false};
  const LaunchJob job{4096, 8, 1};
  const auto text = launch_config("torchtitan", model, c, job, st);
  INFO(text);
  CHECK(text.find("pipeline_parallel_layers_per_stage = 6\n") != std::string::npos);
  const auto back = parse_torchtitan_toml(text, 2, 32, "e.toml").layout;
  CHECK(back.stack.pipeline_split == st.pipeline_split);
  CHECK(back.config.schedule.virtual_stages == 3);
  // 34 units cannot make 16 stages of whole layers a stage: said, not written.
  c.mesh = parse_mesh("pp=4", "--mesh");
  c.schedule = {ScheduleKind::interleaved, 4};
  CHECK(launch_config("torchtitan", model, c, LaunchJob{4096, 16, 1}, st)
            .find("# no pipeline_parallel_layers_per_stage makes 16 stages of 34 layers") !=
        std::string::npos);
}

TEST_CASE("--emit torchtitan: a search's tuned split as the ends' weights, read back the same") {
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("pp=4", "--mesh");
  LaunchStack st;
  st.name = "torchtitan";
  st.pipeline_split = bundled_stack("torchtitan")->pipeline_split;
  // 8, 9, 9, 6: the embedding weighed 1, the loss 2 (36 units, 9 a stage).
  st.chunk_layers = {8, 9, 9, 6};
  const auto text = launch_config("torchtitan", model, c, LaunchJob{4096, 8, 1}, st);
  INFO(text);
  CHECK(text.find("pipeline_parallel_first_stage_less_layers = 1\n"
                  "pipeline_parallel_last_stage_less_layers = 2\n") != std::string::npos);
  const auto back = parse_torchtitan_toml(text, 4, 32, "e.toml").layout;
  REQUIRE(back.stack.pipeline_split);
  CHECK(framework_chunk_layers(*back.stack.pipeline_split, model, 4) == st.chunk_layers);
  // A split no weighting gives: said in a comment, the stack's weights written.
  st.chunk_layers = {10, 6, 8, 8};
  const auto unsaid = launch_config("torchtitan", model, c, LaunchJob{4096, 8, 1}, st);
  CHECK(unsaid.find("# meshsim simulated the layers split 10, 6, 8, 8 over the pipeline stages, "
                    "which the ends' weights cannot say: list the stages in "
                    "module_fqns_per_model_part\n") != std::string::npos);
  CHECK(unsaid.find("pipeline_parallel_first_stage_less_layers = 1\n") != std::string::npos);
}
