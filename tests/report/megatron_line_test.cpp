#include "report/megatron_line.hpp"

#include <doctest/doctest.h>

#include "core/error.hpp"
#include "error_of.hpp"
#include "launch_layout_check.hpp"
#include "model/model_loader.hpp"
#include "strategy/pipeline_split.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::error_of;
using meshsim::test::model_path;

namespace {

struct Layout {
  const char* model;
  const char* mesh;
  std::int32_t zero;
  Recompute recompute;
  Schedule schedule;
  DType dtype;
};

}  // namespace

TEST_CASE("an emitted Megatron line reads back as the same layout and job") {
  const Layout layouts[] = {
      {"llama3.1-70b", "dp=64,tp=8", 0, Recompute::none, {}, DType::bf16},
      {"llama3.1-70b",
       "dp=16,tp=8,pp=4",
       1,
       Recompute::selective,
       {ScheduleKind::interleaved, 5},
       DType::bf16},
      {"llama3.1-70b", "dp=128,tp=4", 3, Recompute::full, {}, DType::fp8},
      {"llama3.1-70b", "dp=128,tp=4,fsdp=16", 3, Recompute::none, {}, DType::bf16},
      {"llama3.1-70b", "dp=64,tp=2,cp=4", 2, Recompute::none, {}, DType::fp16},
      {"llama3.1-405b",
       "dp=32,tp=8,pp=16,fsdp=8",
       1,
       Recompute::full,
       {ScheduleKind::interleaved, 2},
       DType::bf16},
      {"mixtral-8x7b", "dp=32,tp=2,pp=2,ep=8", 1, Recompute::selective, {}, DType::bf16},
      {"mixtral-8x7b",
       "dp=32,tp=2,pp=2,ep=8",
       1,
       Recompute::none,
       {ScheduleKind::interleaved, 2, true},
       DType::bf16},
      {"llama3.1-405b",
       "dp=32,tp=8,pp=16,fsdp=8",
       1,
       Recompute::full,
       {ScheduleKind::interleaved, 2, false, 16},
       DType::bf16},
      {"mixtral-8x7b",
       "dp=64,tp=2,ep=8",
       1,
       Recompute::none,
       {ScheduleKind::one_f_one_b_overlap, 1},
       DType::bf16},
      {"deepseek-v3", "dp=64,pp=8,ep=64", 1, Recompute::full, {}, DType::fp8},
      {"gpt3-175b",
       "dp=8,tp=8,pp=8",
       0,
       Recompute::full,
       {ScheduleKind::interleaved, 3},
       DType::bf16},
  };
  for (const auto& l : layouts) {
    const auto model = load_model(model_path(l.model));
    ParallelConfig c;
    c.mesh = parse_mesh(l.mesh, "--mesh");
    c.zero = l.zero;
    c.sp = c.mesh.tp > 1;
    c.recompute = l.recompute;
    c.schedule = l.schedule;
    const LaunchJob job{8192, 1024, 2, l.dtype, c.mesh.world() / 8, 8};
    for (const char* format : {"megatron", "torchrun"}) {
      const auto text = launch_config(format, model, c, job);
      const std::string context = std::string(l.model) + " " + l.mesh + " " + format + "\n" + text;
      INFO(context);
      const auto line = parse_megatron_line(text, "--from-megatron");
      CHECK(line.ignored.empty());  // every flag meshsim writes, it reads
      const auto back = megatron_job(line, c.mesh.world(), model.layers, "--from-megatron");
      meshsim::test::check_same_layout(back, c, job);
      CHECK(!megatron_architecture_mismatch(line, model).has_value());
    }
  }
}

TEST_CASE("the emitted architecture is the model's, and another model's line is refused") {
  const auto m70 = load_model(model_path("llama3.1-70b"));
  const auto m8 = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8,tp=8", "--mesh");
  const LaunchJob job{8192, 64, 1, DType::bf16, 8, 8};
  const auto text = launch_config("megatron", m70, c, job);
  for (const char* flag :
       {"--num-layers 80 ", "--hidden-size 8192 ", "--ffn-hidden-size 28672 ",
        "--num-attention-heads 64 ", "--group-query-attention --num-query-groups 8 ", "--swiglu ",
        "--normalization RMSNorm ", "--position-embedding-type rope --rotary-base 500000 ",
        "--max-position-embeddings 131072 ", "--vocab-size 128256 ",
        "--untie-embeddings-and-output-weights ", "--disable-bias-linear "}) {
    INFO(flag);
    CHECK(text.find(flag) != std::string::npos);
  }
  const auto line = parse_megatron_line(text, "--from-megatron");
  CHECK(megatron_architecture_mismatch(line, m8) ==
        "--num-layers 80, but the model llama3.1-8b has 32");
  // GPT-3: GELU, LayerNorm, learned positions, tied embeddings with biases.
  const auto gpt = load_model(model_path("gpt3-175b"));
  const auto g = launch_config("megatron", gpt, c, job);
  CHECK(g.find("--swiglu") == std::string::npos);
  CHECK(g.find("--normalization LayerNorm --position-embedding-type learned_absolute") !=
        std::string::npos);
  CHECK(g.find("--untie-embeddings") == std::string::npos);
  CHECK(g.find("--disable-bias-linear") == std::string::npos);
  const auto gl = parse_megatron_line(g, "x");
  CHECK(megatron_architecture_mismatch(gl, m70).has_value());
  // DeepSeek-V3: MLA and the MoE layers after the first three dense ones.
  const auto ds = load_model(model_path("deepseek-v3"));
  const auto d = launch_config("megatron", ds, c, job);
  CHECK(d.find("--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
               "--qk-pos-emb-head-dim 64 --v-head-dim 128") != std::string::npos);
  CHECK(d.find("--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 "
               "--moe-shared-expert-intermediate-size 2048 --moe-layer-freq '([0]*3+[1]*58)'") !=
        std::string::npos);
  // Llama 4 Maverick: MoE every second layer (Megatron's --moe-layer-freq list), dense layers of
  // 16384, experts and the shared expert of 8192; read back as itself.
  const auto mav = load_model(model_path("llama4-maverick"));
  const auto mv = launch_config("megatron", mav, c, job);
  CHECK(mv.find("--ffn-hidden-size 16384 ") != std::string::npos);
  CHECK(mv.find("--num-experts 128 --moe-router-topk 1 --moe-ffn-hidden-size 8192 "
                "--moe-shared-expert-intermediate-size 8192 --moe-layer-freq '([0]*1+[1])*24'") !=
        std::string::npos);
  CHECK(!megatron_architecture_mismatch(parse_megatron_line(mv, "x"), mav).has_value());
  // Where the pattern does not repeat evenly (5 layers, MoE every second), the whole list.
  auto odd = mav;
  odd.layers = 5;
  CHECK(launch_config("megatron", odd, c, job).find("--moe-layer-freq '[0,1,0,1,0]'") !=
        std::string::npos);
  // Nemotron-4 340B: squared ReLU (Megatron-LM --squared-relu), LayerNorm, no biases; read back
  // as itself, and refused against the same shapes with a GELU or a SwiGLU MLP.
  auto nemo = load_model(model_path("nemotron-4-340b"));
  const auto n = launch_config("megatron", nemo, c, job);
  CHECK(n.find("--squared-relu --normalization LayerNorm --position-embedding-type rope") !=
        std::string::npos);
  CHECK(n.find("--swiglu") == std::string::npos);
  const auto nl = parse_megatron_line(n, "x");
  CHECK(nl.ignored.empty());
  CHECK(!megatron_architecture_mismatch(nl, nemo).has_value());
  auto gelu_nemo = nemo;
  gelu_nemo.activation = Activation::gelu;
  CHECK(megatron_architecture_mismatch(nl, gelu_nemo).value_or("") ==
        "the line's MLP is relu2 (--squared-relu), but the model nemotron-4-340b uses gelu");
  nemo.activation = Activation::swiglu;
  CHECK(megatron_architecture_mismatch(nl, nemo).value_or("") ==
        "the line's MLP is relu2 (--squared-relu), but the model nemotron-4-340b uses swiglu");
}

TEST_CASE("the ZeRO stage is Megatron's: distributed optimizer, then Megatron-FSDP") {
  const auto m = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=64", "--mesh");
  const LaunchJob job{4096, 64, 1, DType::bf16, 8, 8};
  auto line_of = [&](std::int32_t zero) {
    c.zero = zero;
    return launch_config("megatron", m, c, job);
  };
  CHECK(line_of(0).find("--use-distributed-optimizer") == std::string::npos);
  CHECK(line_of(0).find("--use-megatron-fsdp") == std::string::npos);
  CHECK(line_of(1).find("--use-distributed-optimizer --overlap-param-gather") != std::string::npos);
  CHECK(line_of(2).find("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads ") !=
        std::string::npos);
  CHECK(line_of(3).find("--use-megatron-fsdp --data-parallel-sharding-strategy "
                        "optim_grads_params") != std::string::npos);
  // What has no Megatron flag is said in a comment before the command.
  c.reshard_after_forward = false;
  c.schedule = {ScheduleKind::zero_bubble, 1};
  const auto text = line_of(3);
  CHECK(text.starts_with("# Megatron-LM has no zero-bubble schedule"));
  CHECK(text.find("# Megatron-FSDP frees gathered weights after each forward") !=
        std::string::npos);
}

TEST_CASE("a user's Megatron launch script reads into a job") {
  // The shape of a recipe script: environment, torchrun's flags, continuation lines, quotes,
  // --flag=value, and flags meshsim does not read.
  const std::string script =
      "# Llama 2 70B on 16 nodes\n"
      "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc_per_node 8 --nnodes 16 \\\n"
      "  pretrain_gpt.py \\\n"
      "  --tensor-model-parallel-size 8 --pipeline-model-parallel-size=4 \\\n"
      "  --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce \\\n"
      "  --num-layers 80 --hidden-size 8192 --num-attention-heads 64 --swiglu \\\n"
      "  --untie-embeddings-and-output-weights --seq-length 4096 --micro-batch-size 1 \\\n"
      "  --global-batch-size 512 --recompute-activations --bf16 --lr 1.5e-4 \\\n"
      "  --data-path \"/data/my corpus_text_document\" --no-masked-softmax-fusion --log-interval "
      "1\n";
  const auto line = parse_megatron_line(script, "--from-megatron");
  CHECK(line.ignored == std::vector<std::string>{"--lr", "--data-path",
                                                 "--no-masked-softmax-fusion", "--log-interval"});
  const auto j = megatron_job(line, 128, 80, "--from-megatron");
  CHECK(j.config.mesh == Mesh{4, 8, 4, 1, 1});  // dp = 128 / (8 · 4)
  CHECK(j.config.zero == 1);
  CHECK(j.config.sp);
  CHECK(j.config.recompute == Recompute::selective);
  CHECK(j.job.seq == 4096);
  CHECK(j.job.global_batch == 512);
  CHECK(j.job.dtype == DType::bf16);
  // Megatron-LM asserts global batch % (micro-batch × dp) == 0; so does the reader: 512 sequences
  // do not split over dp = 96 / 32 = 3.
  CHECK_THROWS_WITH_AS(megatron_job(line, 96, 80, "run.sh"),
                       "run.sh: --global-batch-size 512 is not a multiple of --micro-batch-size 1 "
                       "× the data-parallel degree 3",
                       Error);
  const auto llama2 = load_model(model_path("llama2-70b"));
  CHECK(!megatron_architecture_mismatch(line, llama2).has_value());

  // Megatron-FSDP's pre-0.14 name, HSDP instances, the virtual-stage count, fp32 default.
  const auto older =
      megatron_job(parse_megatron_line(
                       "--use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params "
                       "--num-distributed-optimizer-instances 4 --pipeline-model-parallel-size 2 "
                       "--num-virtual-stages-per-pipeline-rank 3",
                       "x"),
                   64, 48, "x");
  CHECK(older.config.zero == 3);
  CHECK(older.config.mesh.fsdp == 8);  // dp 32 in 4 instances
  CHECK(older.config.schedule.virtual_stages == 3);
  CHECK(older.job.dtype == DType::fp32);
}

TEST_CASE("launch lines meshsim cannot model are clear errors naming the flag") {
  auto job_error = [](const std::string& text, std::int64_t world = 64) {
    return error_of([&] {
      megatron_job(parse_megatron_line(text, "--from-megatron"), world, 32, "--from-megatron");
    });
  };
  CHECK(job_error("--tensor-model-parallel-size 3") ==
        "--from-megatron: 'tp=3,pp=1,cp=1,ep=1': dp is left out, and tp·pp·cp = 3 does not divide "
        "the cluster's 64 GPUs");
  CHECK(job_error("--tensor-model-parallel-size eight") ==
        "--from-megatron: --tensor-model-parallel-size 'eight' is not a positive integer");
  CHECK(job_error("--recompute-granularity full --recompute-method chunked") ==
        "--from-megatron: --recompute-method 'chunked': expected uniform or block");
  CHECK(job_error("--recompute-granularity full --recompute-num-layers 0") ==
        "--from-megatron: --recompute-num-layers '0' is not a positive integer");
  CHECK(job_error("--use-megatron-fsdp --data-parallel-sharding-strategy everything")
            .find("expected no_shard, optim, optim_grads or optim_grads_params") !=
        std::string::npos);
  CHECK(job_error("--num-distributed-optimizer-instances 2") ==
        "--from-megatron: --num-distributed-optimizer-instances needs a sharded optimizer "
        "(--use-distributed-optimizer or Megatron-FSDP)");
  CHECK(job_error("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 5")
            .find("does not divide the 32 layers") != std::string::npos);
  CHECK(error_of([] { parse_megatron_line("--bf16 --bf16", "x"); }) == "x: --bf16 is given twice");
  CHECK(error_of([] { parse_megatron_line("--seq-length", "x"); }) ==
        "x: --seq-length needs a value");
  CHECK(error_of([] { parse_megatron_line("--bf16=1", "x"); }) == "x: --bf16 takes no value");
  CHECK(error_of([] { parse_megatron_line("--data-path 'a b", "x"); }) ==
        "x: unterminated single quote");
  CHECK(error_of([] { parse_megatron_line("pretrain_gpt.py", "x"); }) ==
        "x: no --flags in the launch line");
  CHECK(error_of([] { parse_megatron_line("--bf16 stray", "x"); }) ==
        "x: 'stray' is not a flag (--bf16 takes no value)");
}

TEST_CASE("--overlap-moe-expert-parallel-comm and the micro-batch group of interleaving") {
  const auto schedule_of = [](const std::string& text) {
    return megatron_job(parse_megatron_line(text, "x"), 64, 32, "x").config.schedule;
  };
  CHECK(to_string(schedule_of("--expert-model-parallel-size 8 "
                              "--overlap-moe-expert-parallel-comm")) == "1f1b-overlap");
  CHECK(to_string(schedule_of("--pipeline-model-parallel-size 2 "
                              "--num-layers-per-virtual-pipeline-stage 4 "
                              "--overlap-moe-expert-parallel-comm")) == "interleaved-overlap:4");
  CHECK(to_string(schedule_of("--pipeline-model-parallel-size 2 "
                              "--num-layers-per-virtual-pipeline-stage 4")) == "interleaved:4");
  CHECK(to_string(schedule_of("--pipeline-model-parallel-size 2 "
                              "--num-layers-per-virtual-pipeline-stage 4 "
                              "--microbatch-group-size-per-virtual-pipeline-stage 3")) ==
        "interleaved:4:3");
  CHECK(error_of([&] {
          schedule_of(
              "--pipeline-model-parallel-size 2 "
              "--microbatch-group-size-per-virtual-pipeline-stage 3");
        }) ==
        "x: --microbatch-group-size-per-virtual-pipeline-stage needs virtual pipeline stages");
  CHECK(error_of([&] {
          schedule_of("--pipeline-model-parallel-size 2 --overlap-moe-expert-parallel-comm");
        }) ==
        "x: --overlap-moe-expert-parallel-comm with pp > 1 needs virtual pipeline stages "
        "(--num-layers-per-virtual-pipeline-stage): meshsim merges a pipeline's passes "
        "only on the interleaved schedule");
}

TEST_CASE("a Megatron line's stack switches: --tp-comm-overlap, --cross-entropy-loss-fusion") {
  const auto job_of = [](const std::string& text) {
    return megatron_job(parse_megatron_line(text, "x"), 16, 32, "x");
  };
  const auto plain = job_of("--tensor-model-parallel-size 2 --sequence-parallel");
  CHECK(plain.stack.name == "megatron");
  CHECK(!plain.stack.tp_overlap);
  CHECK(!plain.stack.fused_loss);
  const auto line = parse_megatron_line(
      "--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap "
      "--cross-entropy-loss-fusion",
      "x");
  CHECK(line.ignored.empty());  // both are read
  const auto both = megatron_job(line, 16, 32, "x");
  CHECK(both.stack.tp_overlap);
  CHECK(both.stack.fused_loss);
  // CP's exchange: Megatron's default p2p is the ring; TE's all_gather; a2a is not modelled.
  CHECK(plain.stack.cp_comm == CpComm::ring);
  CHECK(job_of("--context-parallel-size 2 --cp-comm-type p2p").stack.cp_comm == CpComm::ring);
  CHECK(job_of("--context-parallel-size 2 --cp-comm-type all_gather").stack.cp_comm ==
        CpComm::allgather);
  CHECK(error_of([&] { job_of("--context-parallel-size 2 --cp-comm-type a2a"); }) ==
        "x: --cp-comm-type 'a2a': the all-to-all CP exchange is not modelled (p2p or all_gather "
        "are)");
  CHECK(error_of([&] { job_of("--cp-comm-type allgather"); }) ==
        "x: --cp-comm-type 'allgather': expected p2p, all_gather, a2a or a2a+p2p");
  // Megatron-LM asserts sequence parallelism for the userbuffers overlap.
  CHECK(error_of([&] { job_of("--tensor-model-parallel-size 2 --tp-comm-overlap"); }) ==
        "x: --tp-comm-overlap needs --sequence-parallel (Megatron-LM asserts it)");
  // FP8 parameters gathered in FP8 (--fp8-param-gather), an FP8 recipe's switch.
  CHECK(!plain.stack.fp8_params);
  CHECK(job_of("--fp8-format hybrid --fp8-param-gather").stack.fp8_params);
  CHECK(parse_megatron_line("--fp8-format hybrid --fp8-param-gather", "x").ignored.empty());
  CHECK(error_of([&] { job_of("--bf16 --fp8-param-gather"); }) ==
        "x: --fp8-param-gather needs --fp8-format (FP8 parameters are an FP8 recipe's)");
  // Written back for an FP8 job whose stack runs it (and only then), and read back the same.
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8", "--mesh");
  c.zero = 1;
  LaunchStack st;
  st.name = "megatron";
  st.fp8_params = true;
  for (const auto dtype : {DType::fp8, DType::bf16}) {
    const auto text = launch_config("megatron", model, c, LaunchJob{4096, 8, 1, dtype}, st);
    CHECK((text.find("--fp8-param-gather") != std::string::npos) == (dtype == DType::fp8));
    CHECK(megatron_job(parse_megatron_line(text, "e"), 8, 32, "e").stack.fp8_params ==
          (dtype == DType::fp8));
  }
}

TEST_CASE("a Megatron flag takes every word up to the next flag; --recompute-modules is read") {
  // Megatron-LM has no positional arguments: --data-path's weighted corpora (argparse nargs='*')
  // are one flag's words, not strays.
  const auto line = parse_megatron_line(
      "pretrain_gpt.py --data-path 0.3 /d/a_text 0.7 /d/b_text --tensor-model-parallel-size 2 "
      "--recompute-granularity selective --recompute-modules core_attn moe_act layernorm "
      "--split 949 50 1 --bf16",
      "x");
  CHECK(line.ignored == std::vector<std::string>{"--data-path", "--split"});
  CHECK(line.flags.at("--recompute-modules") == "core_attn moe_act layernorm");
  const auto j = megatron_job(line, 16, 32, "x");
  CHECK(j.config.mesh.tp == 2);
  CHECK(j.config.recompute == Recompute::selective);
  CHECK(j.config.recompute_modules ==
        std::vector<std::string>{"core_attn", "moe_act", "layernorm"});
  // A known flag of one value followed by a second word is still an error.
  CHECK(error_of([] { parse_megatron_line("--seq-length 4096 8192", "x"); }) ==
        "x: '8192' is not a flag (--seq-length takes one value)");
  // Megatron asserts the modules go with selective granularity.
  CHECK(error_of([] {
          megatron_job(parse_megatron_line("--recompute-modules moe_act", "x"), 16, 32, "x");
        }) == "x: --recompute-modules needs --recompute-granularity selective");
  CHECK(
      megatron_job(parse_megatron_line(
                       "--recompute-granularity selective --recompute-modules moe layernorm", "x"),
                   16, 32, "x")
          .config.recompute_modules == std::vector<std::string>{"moe", "layernorm"});
  // The emitted line writes the modules back.
  const auto model = load_model(model_path("deepseek-v3"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=64,pp=8,ep=64", "--mesh");
  c.zero = 1;
  c.recompute = Recompute::selective;
  c.recompute_modules = {"moe_act", "mla_up_proj"};
  const auto text = launch_config("megatron", model, c, {4096, 1024, 1, DType::bf16, 64, 8});
  CHECK(text.find(" --recompute-granularity selective --recompute-modules moe_act mla_up_proj") !=
        std::string::npos);
  CHECK(text.find("default module set") == std::string::npos);
  const auto back = megatron_job(parse_megatron_line(text, "x"), 512, model.layers, "x");
  CHECK(back.config.recompute_modules == c.recompute_modules);
}

TEST_CASE("Megatron's recompute methods: block and uniform groups read and written back") {
  const auto model = load_model(model_path("llama3.1-70b"));
  for (const auto& [method, n] : std::vector<std::pair<std::string, std::int64_t>>{
           {"block", 3}, {"uniform", 2}, {"uniform", 1}}) {
    const auto j = megatron_job(
        parse_megatron_line("--pipeline-model-parallel-size 4 --recompute-granularity full "
                            "--recompute-method " +
                                method + " --recompute-num-layers " + std::to_string(n),
                            "x"),
        64, model.layers, "x");
    CHECK(j.config.recompute == Recompute::full);
    CHECK(j.config.recompute_block == (method == "block" ? n : 0));
    CHECK(j.config.recompute_group == (method == "uniform" ? n : 1));
    const auto text = launch_config("megatron", model, j.config, {4096, 64, 1, DType::bf16, 8, 8});
    CHECK(text.find("--recompute-method " + method + " --recompute-num-layers " +
                    std::to_string(n)) != std::string::npos);
    const auto back = megatron_job(parse_megatron_line(text, "x"), 64, model.layers, "x");
    CHECK(back.config.recompute_block == j.config.recompute_block);
    CHECK(back.config.recompute_group == j.config.recompute_group);
  }
  // Megatron's default method with full granularity is uniform, one layer a group.
  const auto plain =
      megatron_job(parse_megatron_line("--recompute-granularity full", "x"), 8, model.layers, "x");
  CHECK(plain.config.recompute_block == 0);
  CHECK(plain.config.recompute_group == 1);
}

TEST_CASE("a Megatron line's pipeline split: the ends weighed, or the ends' layers given") {
  const auto job_of = [](const std::string& text, std::int64_t world) {
    return megatron_job(parse_megatron_line(text, "x"), world, 126, "x");
  };
  // Megatron-Core's --account-for-*: the embedding and the loss each count as a layer; the
  // virtual stages come from the 128 units (126 + 2) / (16 × 4).
  const auto weighed = job_of(
      "--pipeline-model-parallel-size 16 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split --num-layers-per-virtual-pipeline-stage 4",
      16);
  CHECK(weighed.stack.pipeline_split == PipelineSplit{PipelineSplitMethod::even, 1, 1, true});
  CHECK(to_string(weighed.config.schedule) == "interleaved:2");
  CHECK(weighed.chunk_layers.empty());
  CHECK(!job_of("--pipeline-model-parallel-size 2", 2).stack.pipeline_split);  // the stack's
  // --decoder-first/last-pipeline-num-layers: the first and last stage's layers, the rest even
  // over the middle stages, each stage's spread over its virtual chunks (chunk g on stage g mod
  // pp): 62 layers, stages 14, 16, 16, 16, two chunks each.
  using V = std::vector<std::int64_t>;
  CHECK(job_of("--num-layers 62 --pipeline-model-parallel-size 4 "
               "--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 14 "
               "--decoder-last-pipeline-num-layers 16",
               4)
            .chunk_layers == V{7, 8, 8, 8, 7, 8, 8, 8});
  // DeepSeek-V3's 61 layers on 8 stages: the first 5, the other seven 8 each.
  CHECK(job_of("--num-layers 61 --pipeline-model-parallel-size 8 "
               "--decoder-first-pipeline-num-layers 5",
               8)
            .chunk_layers == V{5, 8, 8, 8, 8, 8, 8, 8});
  const auto error = [&](const std::string& text, std::int64_t world) {
    return error_of([&] { job_of(text, world); });
  };
  CHECK(error("--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 30 "
              "--account-for-loss-in-pipeline-split",
              4) ==
        "x: --decoder-first/last-pipeline-num-layers and --account-for-*-in-pipeline-split do "
        "not go together (the first fix the ends' layers, the second weigh them)");
  CHECK(error("--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 31", 4) ==
        "x: 126 layers less the first and last stage's (31 and not given) do not divide into the "
        "3 middle pipeline stages");
  CHECK(error("--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 63 "
              "--num-virtual-stages-per-pipeline-rank 2",
              2) == "x: pipeline stage 0's 63 layers do not divide into 2 virtual stages");
  CHECK(error("--decoder-last-pipeline-num-layers 2", 1) ==
        "x: --decoder-first/last-pipeline-num-layers need a pipeline "
        "(--pipeline-model-parallel-size > 1)");
  CHECK(error("--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 62 "
              "--num-layers-per-virtual-pipeline-stage 2",
              2) ==
        "x: meshsim reads an uneven pipeline split with --num-virtual-stages-per-pipeline-rank, "
        "not --num-layers-per-virtual-pipeline-stage");
  // What --emit megatron writes reads back the same. Llama 3.1 405B's 126 layers do not divide
  // into 16 × 2 chunks; with the ends weighed (128 units) they do, so the `megatron` stack runs
  // that (runnable_split) and the line says so, as NeMo's 405B recipe does.
  const auto model = load_model(model_path("llama3.1-405b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=2,tp=8,pp=16", "--mesh");
  c.sp = true;
  c.schedule = {ScheduleKind::interleaved, 2};
  LaunchStack st;
  st.pipeline_split = bundled_stack("megatron")->pipeline_split;
  const auto text = launch_config("megatron", model, c, LaunchJob{8192, 64, 1}, st);
  INFO(text);
  CHECK(text.find("--account-for-embedding-in-pipeline-split "
                  "--account-for-loss-in-pipeline-split") != std::string::npos);
  CHECK(text.find("--num-layers-per-virtual-pipeline-stage 4") != std::string::npos);
  const auto back = megatron_job(parse_megatron_line(text, "e"), 256, model.layers, "e");
  CHECK(back.stack.pipeline_split == PipelineSplit{PipelineSplitMethod::even, 1, 1, true});
  CHECK(framework_chunk_layers(*back.stack.pipeline_split, model, 32) ==
        framework_chunk_layers(*st.pipeline_split, model, 32));
  // DeepSeek-V3's 61 layers on 8 stages divide in no weighting: the line gives the ends' layers
  // of the uneven split the stack ran (7, 8 × 6, 6), and they read back as that split.
  const auto v3 = load_model(model_path("deepseek-v3"));
  ParallelConfig d;
  d.mesh = parse_mesh("dp=64,pp=8,ep=64", "--mesh");
  const auto v3_text = launch_config("megatron", v3, d, LaunchJob{4096, 512, 1}, st);
  CHECK(
      v3_text.find("--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 6") !=
      std::string::npos);
  CHECK(v3_text.find("# ") == std::string::npos);  // nothing Megatron cannot say
  CHECK(megatron_job(parse_megatron_line(v3_text, "e"), 512, v3.layers, "e").chunk_layers ==
        framework_chunk_layers(*st.pipeline_split, v3, 8));
  CHECK(back.config.schedule == c.schedule);
}

TEST_CASE(
    "--emit megatron: a search's tuned split as the switches that give it, read back the same") {
  const auto model = load_model(model_path("llama3.1-8b"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=4,pp=2", "--mesh");
  LaunchStack st;
  st.pipeline_split = bundled_stack("megatron")->pipeline_split;
  const auto emit = [&](std::vector<std::int64_t> chunks) {
    st.chunk_layers = std::move(chunks);
    return launch_config("megatron", model, c, LaunchJob{8192, 64, 1}, st);
  };
  // 17, 15: the first and last stage's layers.
  const auto tuned = emit({17, 15});
  INFO(tuned);
  CHECK(
      tuned.find("--decoder-first-pipeline-num-layers 17 --decoder-last-pipeline-num-layers 15") !=
      std::string::npos);
  CHECK(tuned.find("# ") == std::string::npos);
  CHECK(megatron_job(parse_megatron_line(tuned, "e"), 8, model.layers, "e").chunk_layers ==
        std::vector<std::int64_t>{17, 15});
  // The stack's own split: no switch.
  const auto own = emit({16, 16});
  CHECK(own.find("pipeline-num-layers") == std::string::npos);
  CHECK(own.find("account-for") == std::string::npos);
  // Interleaved (one chunk a stage no longer), a split no account flag gives: said, not written.
  c.schedule = {ScheduleKind::interleaved, 2};
  const auto unsaid = emit({9, 8, 8, 7});
  CHECK(unsaid.find("# meshsim simulated the layers split 9, 8, 8, 7 over the pipeline chunks, "
                    "which Megatron's switches cannot say; the line below splits them evenly") !=
        std::string::npos);
  CHECK(unsaid.find("pipeline-num-layers") == std::string::npos);
  // Interleaved on 4 stages, each stage's chunks alike (3, 5, 5, 3 twice): the stages' layers
  // 6, 10, 10, 6 as the first and last stage's, with the virtual stages per rank.
  c.mesh = parse_mesh("dp=2,pp=4", "--mesh");
  const auto vpp = emit({3, 5, 5, 3, 3, 5, 5, 3});
  INFO(vpp);
  CHECK(vpp.find("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6") !=
        std::string::npos);
  CHECK(vpp.find("--num-virtual-stages-per-pipeline-rank 2") != std::string::npos);
  CHECK(vpp.find("--num-layers-per-virtual-pipeline-stage") == std::string::npos);
  CHECK(megatron_job(parse_megatron_line(vpp, "e"), 8, model.layers, "e").chunk_layers ==
        std::vector<std::int64_t>{3, 5, 5, 3, 3, 5, 5, 3});
  // The stack's own split where nothing divides, interleaved: Llama 3.1 70B's 80 layers on 6
  // stages × 2 run Megatron's uneven split (stages 12, 14 × 4, 12), written as it reads back.
  const auto llama70 = load_model(model_path("llama3.1-70b"));
  ParallelConfig p6;
  p6.mesh = parse_mesh("tp=8,pp=6", "--mesh");
  p6.sp = true;
  p6.schedule = {ScheduleKind::interleaved, 2};
  st.chunk_layers.clear();
  const auto own70 = launch_config("megatron", llama70, p6, LaunchJob{4096, 12, 1}, st);
  INFO(own70);
  CHECK(
      own70.find("--decoder-first-pipeline-num-layers 12 --decoder-last-pipeline-num-layers 12") !=
      std::string::npos);
  CHECK(own70.find("--num-virtual-stages-per-pipeline-rank 2") != std::string::npos);
  CHECK(own70.find("# ") == std::string::npos);
  CHECK(megatron_job(parse_megatron_line(own70, "e"), 48, llama70.layers, "e").chunk_layers ==
        framework_chunk_layers(*st.pipeline_split, llama70, 12, 2));
}
