// The software-stack loader and what each stack changes in the trace and memory: hand-derived
// numbers from the stacks' files and ../shared/reference/software-stacks.md.
#include "stack/stack.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "compute/compute_model.hpp"
#include "error_of.hpp"
#include "json_mutation.hpp"
#include "memory/memory_model.hpp"
#include "model/model_loader.hpp"
#include "model/op_catalogue.hpp"
#include "strategy/layer_plan.hpp"
#include "strategy/trace_builder.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {

Stack stack_from(const std::string& text) {
  return read_stack(JsonRef::root(parse_json_text(text, "s.json"), "s.json"));
}

const char* kMinimal = R"({"name": "x", "description": "d", "sources": ["s"],
  "tp_overlap": {"method": "none", "on": false}, "interference": {"on": false},
  "data_parallel": {"bucket_min_params": 1000, "grad_reduce_dtype": "bf16"},
  "state_bytes_per_param": {"weight": 2, "grad": 2, "master": 4, "optimizer": 8},
  "optimizer_bytes_per_param": 28,
  "recompute": [{"name": "none", "mode": "none", "description": "d"}],
  "default_recompute": "none"})";

std::string error_of(const std::string& text) {
  try {
    stack_from(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

ModelSpec model(const std::string& name) {
  return load_model(source_path("workloads/models/" + name + ".json"));
}

// Llama 3.1 8B's layer 0 at 4096 tokens with FP8 GEMMs, on `tp` ranks.
std::vector<OpSpec> fp8_layer(std::int64_t tp, bool sp) {
  LayerShape shape;
  shape.seq = 4096;
  shape.dtype = DType::fp8;
  return layer_ops(model("llama3.1-8b"), 0, shape, {tp, sp, 1, 1});
}

// An op of the layer by name; a missing one fails the test instead of skipping its checks.
OpSpec named(const std::vector<OpSpec>& layer, const std::string& name) {
  const auto it = std::ranges::find(layer, name, &OpSpec::name);
  REQUIRE_MESSAGE(it != layer.end(), "no op " << name);
  return *it;
}

std::vector<double> bytes(const std::vector<Kernel>& ks) {
  std::vector<double> out;
  for (const auto& k : ks) out.push_back(k.bytes);
  return out;
}

}  // namespace

TEST_CASE("every bundled stack loads and names what it assumes") {
  const std::vector<std::string> names{"deepspeed", "ideal", "megatron", "torchtitan",
                                       "torchtitan-compile"};
  CHECK(bundled_stack_names() == names);
  for (const auto& n : names) {
    const auto& s = *bundled_stack(n);
    CHECK(s.name == n);
    CHECK(!s.sources.empty());
    CHECK(s.policy(s.default_recompute) != nullptr);
    // The compiled-in copy is the file.
    CHECK(load_stack(source_path("workloads/stacks/" + n + ".json")).description == s.description);
  }
  CHECK(default_stack().name == "megatron");
}

TEST_CASE("the stacks' documented gradient dtypes and model-state bytes") {
  const auto& mg = *bundled_stack("megatron");
  // Megatron: fp32 for bf16 runs, bf16 for its FP8 recipes, fp16 for fp16 (arguments.py).
  CHECK(mg.grad_reduce_bytes(DType::bf16) == 4);
  CHECK(mg.grad_reduce_bytes(DType::fp8) == 2);
  CHECK(mg.grad_reduce_bytes(DType::fp16) == 2);
  // dist_optimizer.md: bf16 params + fp32 grads = 6 bytes, + 12 of optimizer state: 18.
  CHECK(stack_recipe(mg, DType::bf16).per_param() == 18);
  CHECK(stack_recipe(mg, DType::fp8).per_param() == 19);  // + the fp8 weight copy
  CHECK(bundled_stack("torchtitan")->grad_reduce_bytes(DType::bf16) == 4);
  CHECK(bundled_stack("deepspeed")->grad_reduce_bytes(DType::bf16) == 2);
  CHECK(stack_recipe(*bundled_stack("torchtitan"), DType::bf16).per_param() == 16);
  // torchao casts the weights every forward (a temporary): no persistent FP8 copy.
  CHECK(mg.keeps_fp8_weights());
  for (const auto* n : {"torchtitan", "torchtitan-compile"}) {
    CHECK(!bundled_stack(n)->keeps_fp8_weights());
    CHECK(stack_recipe(*bundled_stack(n), DType::fp8).per_param() == 16);
  }
  // torch.distributed.pipelining syncs FSDP2 once per step; DeepSpeed's ZeRO-2 every micro-batch.
  for (const auto* n : {"torchtitan", "torchtitan-compile"}) {
    CHECK(bundled_stack(n)->data_parallel.sharded_with_pp == ShardedWithPp::once_per_step);
    CHECK(stack_recipe(*bundled_stack(n), DType::bf16).sharded_with_pp ==
          ShardedWithPp::once_per_step);
  }
  for (const auto* n : {"megatron", "deepspeed", "ideal"})
    CHECK(bundled_stack(n)->data_parallel.sharded_with_pp == ShardedWithPp::every_microbatch);
  // torchtitan replicates or shards with FSDP2 (ZeRO-3): no ZeRO-1/2.
  for (const auto* n : {"torchtitan", "torchtitan-compile"})
    CHECK(bundled_stack(n)->zero_stages == std::vector<std::int32_t>{0, 3});
  for (const auto* n : {"megatron", "deepspeed", "ideal"})
    CHECK(bundled_stack(n)->zero_stages == std::vector<std::int32_t>{0, 1, 2, 3});
  // Schedules: Megatron-LM's main line (no GPipe, no zero bubble), torch.distributed.pipelining
  // (no merged passes), DeepSpeed's TrainSchedule.
  using Names = std::vector<std::string>;
  CHECK(bundled_stack("megatron")->schedules ==
        Names{"1f1b", "interleaved", "interleaved-overlap", "1f1b-overlap"});
  for (const auto* n : {"torchtitan", "torchtitan-compile"})
    CHECK(bundled_stack(n)->schedules == Names{"gpipe", "1f1b", "interleaved", "zb"});
  CHECK(bundled_stack("deepspeed")->schedules == Names{"1f1b"});
  CHECK(bundled_stack("ideal")->schedules.size() == kScheduleFamilies.size());
  CHECK(unrun_notes(*bundled_stack("deepspeed"), 1, "gpipe") ==
        Names{"stack 'deepspeed' does not run gpipe (its schedules: 1f1b); simulated as asked"});
  CHECK(unrun_notes(*bundled_stack("torchtitan"), 3, "1f1b").empty());
  // Megatron's bucket: max(40 M, 1 M × DP) parameters in the reduction dtype.
  CHECK(stack_bucket_bytes(mg, 8, DType::bf16) == 40e6 * 4);
  CHECK(stack_bucket_bytes(mg, 64, DType::bf16) == 64e6 * 4);
  // Transformer Engine and torchao's Float8 tensor parallelism (torchtitan) gather FP8 inputs in
  // FP8 runs; DeepSpeed's gathers 16 bits.
  CHECK(mg.fp8_tp_all_gathers);
  CHECK(bundled_stack("torchtitan")->fp8_tp_all_gathers);
  CHECK(bundled_stack("torchtitan-compile")->fp8_tp_all_gathers);
  CHECK(!bundled_stack("deepspeed")->fp8_tp_all_gathers);
  // torchtitan's float8 all-gather and Megatron's --fp8-param-gather are off by default.
  for (const char* n : {"torchtitan", "torchtitan-compile"})
    CHECK(bundled_stack(n)->fp8_fsdp_all_gather == Fp8FsdpAllGather::none);
  for (const auto& n : bundled_stack_names()) {
    CAPTURE(n);
    CHECK(!bundled_stack(n)->fp8_params);
    CHECK(!gathers_fp8_weights(*bundled_stack(n)));
  }
}

TEST_CASE("the stack loader is strict: one error naming the file and the field") {
  CHECK(stack_from(kMinimal).name == "x");
  std::string t = kMinimal;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = t;
    s.replace(s.find(from), from.size(), to);
    return error_of(s);
  };
  CHECK(with(R"("name": "x",)", R"("name": "x", "colour": 1,)")
            .starts_with("s.json:/colour: unknown key 'colour'"));
  CHECK(with(R"("default_recompute": "none")", R"("default_recompute": "op")")
            .starts_with("s.json:/default_recompute: names no policy"));
  CHECK(with(R"("method": "none", "on": false)", R"("method": "nccl", "on": false)")
            .starts_with("s.json:/tp_overlap/method: unknown TP overlap method 'nccl'"));
  CHECK(with(R"("method": "none", "on": false)", R"("method": "none", "on": true)") ==
        "s.json:/tp_overlap: 'on' is true but method is none");
  CHECK(with(R"("name": "x",)", R"("name": "x", "cuda_graphs": "sometimes",)") ==
        "s.json:/cuda_graphs: unknown cuda_graphs 'sometimes' (known: none, layer, iteration)");
  CHECK(stack_from(t).cuda_graphs == CudaGraphs::none);
  CHECK(with(R"("name": "x",)", R"("name": "x", "ep_dispatch": "pplx",)") ==
        "s.json:/ep_dispatch: unknown ep_dispatch 'pplx' (known: all_to_all, deepep)");
  CHECK(stack_from(t).ep_dispatch == EpDispatch::all_to_all);  // absent: NCCL's all-to-all
  {
    const std::string from = R"("name": "x",)";
    std::string d = t;
    d.replace(d.find(from), from.size(), R"("name": "x", "ep_dispatch": "deepep",)");
    CHECK(stack_from(d).ep_dispatch == EpDispatch::deepep);
  }
  CHECK(with(R"("name": "x",)", R"("name": "x", "cp_comm": "ulysses",)") ==
        "s.json:/cp_comm: unknown cp_comm 'ulysses' (known: ring, allgather)");
  CHECK(stack_from(t).cp_comm == CpComm::ring);  // absent: ring attention
  {
    const std::string from = R"("name": "x",)";
    std::string d = t;
    d.replace(d.find(from), from.size(), R"("name": "x", "cp_comm": "allgather",)");
    CHECK(stack_from(d).cp_comm == CpComm::allgather);
  }
  // Absent: every micro-batch reduces its sharded gradients, as without a pipeline.
  CHECK(stack_from(t).data_parallel.sharded_with_pp == ShardedWithPp::every_microbatch);
  CHECK(with(R"("grad_reduce_dtype": "bf16")",
             R"("grad_reduce_dtype": "bf16", "sharded_with_pp": "never")") ==
        "s.json:/data_parallel/sharded_with_pp: unknown sharded_with_pp 'never' (known: "
        "every_microbatch, once_per_step)");
  {
    const std::string from = R"("grad_reduce_dtype": "bf16")";
    std::string d = t;
    d.replace(d.find(from), from.size(),
              R"("grad_reduce_dtype": "bf16", "sharded_with_pp": "once_per_step")");
    CHECK(stack_from(d).data_parallel.sharded_with_pp == ShardedWithPp::once_per_step);
  }
  // Absent: every ZeRO stage; given, a strict list of stages 0..3.
  CHECK(stack_from(t).zero_stages == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(stack_from(t).zero_stages_text() == "0, 1, 2 or 3");
  {
    const std::string from = R"("default_recompute": "none")";
    auto zero = [&](const std::string& list) {
      std::string d = t;
      d.replace(d.find(from), from.size(), from + R"(, "zero_stages": )" + list);
      return d;
    };
    const auto s = stack_from(zero("[3, 0]"));
    CHECK(s.zero_stages == std::vector<std::int32_t>{0, 3});
    CHECK(s.runs_zero(3));
    CHECK_FALSE(s.runs_zero(1));
    CHECK(s.zero_stages_text() == "0 or 3");
    CHECK(error_of(zero("[]")).starts_with("s.json:/zero_stages: "));
    CHECK(error_of(zero("[0, 4]")).starts_with("s.json:/zero_stages/1: "));
    CHECK(error_of(zero("[3, 3]")) == "s.json:/zero_stages/1: ZeRO stage 3 is given twice");
    // Schedules by family; absent: every one.
    auto sched = [&](const std::string& list) {
      std::string d = t;
      d.replace(d.find(from), from.size(), from + R"(, "schedules": )" + list);
      return d;
    };
    CHECK(stack_from(t).schedules.size() == kScheduleFamilies.size());
    const auto one = stack_from(sched(R"(["1f1b"])"));
    CHECK(one.runs_schedule("1f1b"));
    CHECK_FALSE(one.runs_schedule("zb"));
    CHECK(error_of(sched(R"(["1f1b", "dualpipe"])")) ==
          "s.json:/schedules/1: unknown schedule 'dualpipe' (known: gpipe, 1f1b, interleaved, "
          "interleaved-overlap, zb, 1f1b-overlap)");
    CHECK(error_of(sched(R"(["1f1b", "1f1b"])")) ==
          "s.json:/schedules/1: schedule '1f1b' is given twice");
    CHECK(error_of(sched(R"(["gpipe"])")) ==
          "s.json:/schedules: must include 1f1b (the schedule of a run without a pipeline)");
  }
  CHECK(!stack_from(t).fp8_tp_all_gathers);                            // absent: 16-bit gathers
  CHECK(stack_from(t).fp8_fsdp_all_gather == Fp8FsdpAllGather::none);  // absent: 16-bit
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_fsdp_all_gather": true,)")
            .starts_with("s.json:/fp8_fsdp_all_gather: "));
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_fsdp_all_gather": "rowwise",)") ==
        "s.json:/fp8_fsdp_all_gather: unknown FP8 FSDP all-gather 'rowwise' (known: none, "
        "dynamic, precomputed)");
  {
    std::string d = t;
    const std::string from = R"("name": "x",)";
    d.replace(d.find(from), from.size(), R"("name": "x", "fp8_fsdp_all_gather": "precomputed",)");
    CHECK(stack_from(d).fp8_fsdp_all_gather == Fp8FsdpAllGather::precomputed);
    // FP8 parameters gather in FP8 already: not beside an FP8 FSDP all-gather.
    const std::string both = R"("name": "x", "fp8_params": true,)";
    CHECK(error_of(d.replace(d.find(from), from.size(), both)) ==
          "s.json:/fp8_params: FP8 parameters are gathered in FP8 already: fp8_fsdp_all_gather "
          "must be none");
  }
  CHECK(!stack_from(t).fp8_params);  // absent: 16-bit working weights
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_params": true,)").empty());
  {
    // FP8 parameters are cast from fp32 main weights: a stack without them cannot have them.
    std::string d = t;
    d.replace(d.find(R"("master": 4)"), 11, R"("master": 0)");
    d.replace(d.find(R"("name": "x",)"), 12, R"("name": "x", "fp8_params": true,)");
    CHECK(error_of(d) ==
          "s.json:/fp8_params: FP8 parameters need fp32 main weights beside them "
          "(state_bytes_per_param.master > 0)");
    CHECK(meshsim::test::error_of([] { with_fp8_params(*bundled_stack("torchtitan")); }) ==
          "--fp8-param-gather: stack 'torchtitan' keeps no fp32 main weights beside its working "
          "weights, which FP8 parameters are cast from");
  }
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_params": 1,)")
            .starts_with("s.json:/fp8_params: "));
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_tp_all_gathers": "yes",)")
            .starts_with("s.json:/fp8_tp_all_gathers: "));
  // Routed experts in FP8: absent as before the field (true); torchtitan's stay 16-bit.
  CHECK(stack_from(t).fp8_routed_experts);
  CHECK(bundled_stack("megatron")->fp8_routed_experts);
  CHECK_FALSE(bundled_stack("torchtitan")->fp8_routed_experts);
  CHECK_FALSE(bundled_stack("torchtitan-compile")->fp8_routed_experts);
  {
    std::string d = t;
    const std::string from = R"("name": "x",)";
    CHECK_FALSE(stack_from(d.replace(d.find(from), from.size(),
                                     R"("name": "x", "fp8_routed_experts": false,)"))
                    .fp8_routed_experts);
  }
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_routed_experts": 0,)")
            .starts_with("s.json:/fp8_routed_experts: "));
  CHECK(stack_from(t).fp8_casts.empty());  // absent: no quantization kernels priced
  CHECK(
      with(R"("name": "x",)",
           R"("name": "x", "fp8_casts": {"logits": {"input": "none", "output_grad": "none"}},)")
          .starts_with("s.json:/fp8_casts/logits: not a GEMM op with weights (known: qkv_proj, "));
  CHECK(with(R"("name": "x",)",
             R"("name": "x", "fp8_casts": {"out_proj": {"input": "cast", "output_grad": "none"}},)")
            .starts_with("s.json:/fp8_casts/out_proj/input: unknown FP8 cast 'cast' (known: none, "
                         "transpose, cast_transpose, amax_cast_transpose)"));
  CHECK(with(R"("name": "x",)",
             R"("name": "x", "fp8_casts": {"out_proj": {"input": "none", "output_grad": "none",)"
             R"( "weight": "amax"}},)")
            .starts_with("s.json:/fp8_casts/out_proj/weight: unknown FP8 cast 'amax'"));
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_casts": {"out_proj": {"input": "none"}},)")
            .starts_with("s.json:/fp8_casts/out_proj: missing required field 'output_grad'"));
  CHECK(with(R"("name": "x",)", R"("name": "x", "fp8_casts": [],)")
            .starts_with("s.json:/fp8_casts: must be an object"));
  CHECK(with(R"("grad_reduce_dtype": "bf16")", R"("grad_reduce_dtype": {"bf16": "fp32"})")
            .starts_with("s.json:/data_parallel/grad_reduce_dtype: missing required field"));
  CHECK(with(R"("grad_reduce_dtype": "bf16")", R"("grad_reduce_dtype": "fp8")") ==
        "s.json:/data_parallel/grad_reduce_dtype: gradients are not reduced in fp8");
  CHECK(with(R"("mode": "none", "description": "d")",
             R"("mode": "none", "description": "d", "ops": ["rope"])") ==
        "s.json:/recompute/0/ops: only a selective policy lists ops");
  CHECK(with(R"("optimizer_bytes_per_param": 28)", R"("optimizer_bytes_per_param": -1)")
            .starts_with("s.json:/optimizer_bytes_per_param: "));
  CHECK(with(R"("mode": "none", "description": "d")",
             R"("mode": "none", "description": "d", "every": 2)") ==
        "s.json:/recompute/0/every: only a full policy checkpoints every n-th layer");
  CHECK(with(R"("mode": "none", "description": "d")",
             R"("mode": "full", "description": "d", "every": 0)")
            .starts_with("s.json:/recompute/0/every: "));
  CHECK(with(R"("interference": {"on": false})",
             R"("interference": {"on": false}, "tp_backward": {"regather_input": true})")
            .starts_with("s.json:/tp_backward: missing required field 'overlap_with_wgrad'"));
  CHECK(with(R"("interference": {"on": false})",
             R"("interference": {"on": false}, "fsdp_copies": {"on": "yes"})")
            .starts_with("s.json:/fsdp_copies/on: "));
  CHECK(with(R"("optimizer_bytes_per_param": 28)",
             R"("optimizer_bytes_per_param": 28, "grad_norm_bytes_per_param": 100)") ==
        "s.json:/grad_norm_bytes_per_param: more than 64 bytes per parameter");
  // The optional sections default to what stacks did before them.
  const auto minimal = stack_from(kMinimal);
  CHECK_FALSE(minimal.tp_backward.regather_input);
  CHECK_FALSE(minimal.tp_backward.overlap_with_wgrad);
  CHECK_FALSE(minimal.fsdp_copies.on);
  CHECK(minimal.grad_norm_bytes_per_param == 0);
}

TEST_CASE("the stacks' documented TP backward, FSDP copies and clipping") {
  // Megatron/TE: SP's saved input shard re-gathered beside the dgrad, the dgrad output reduced
  // beside the wgrad; torchtitan's DTensor TP neither; FSDP2's copies in torchtitan only.
  const auto& mg = *bundled_stack("megatron");
  CHECK(mg.tp_backward.regather_input);
  CHECK(mg.tp_backward.overlap_with_wgrad);
  CHECK_FALSE(mg.fsdp_copies.on);
  CHECK(mg.grad_norm_bytes_per_param == 4);
  for (const char* n : {"torchtitan", "torchtitan-compile"}) {
    const auto& tt = *bundled_stack(n);
    CHECK_FALSE(tt.tp_backward.regather_input);
    CHECK_FALSE(tt.tp_backward.overlap_with_wgrad);
    CHECK(tt.fsdp_copies.on);
    CHECK(tt.grad_norm_bytes_per_param == 4);
  }
  // DeepSpeed's gradient_clipping defaults to 0 (off); the ideal stack has none of these.
  CHECK(bundled_stack("deepspeed")->grad_norm_bytes_per_param == 0);
  CHECK_FALSE(bundled_stack("ideal")->tp_backward.regather_input);
  CHECK_FALSE(bundled_stack("ideal")->fsdp_copies.on);
}

TEST_CASE("recompute names resolve to the stack's policies") {
  const auto& tt = *bundled_stack("torchtitan");
  CHECK(recompute_policy(tt, "op").mode == Recompute::selective);
  CHECK(recompute_policy(tt, "selective").name == "op");  // the stack's selective policy
  CHECK(recompute_policy(tt, "full").mode == Recompute::full);
  // torchtitan's `layer` policy: full AC on every second block; `full` stays every block.
  CHECK(recompute_policy(tt, "layer").mode == Recompute::full);
  CHECK(recompute_policy(tt, "layer").every == 2);
  CHECK(recompute_policy(tt, "full").every == 1);
  CHECK_THROWS_WITH(recompute_policy(tt, "block"),
                    "--recompute: stack 'torchtitan' has no policy 'block' (its policies: none, "
                    "op, full, layer)");
  CHECK(resolve_stack(source_path("workloads/stacks/deepspeed.json")).name == "deepspeed");
  CHECK_THROWS_AS(resolve_stack("no-such-stack"), Error);
}

TEST_CASE("mutants of the bundled stacks load or fail cleanly") {
  Rng rng(7);
  for (const auto& n : bundled_stack_names()) {
    const auto path = source_path("workloads/stacks/" + n + ".json");
    const Json original = load_json_file(path);
    int errors = 0;
    for (int i = 0; i < 200; ++i) {
      Json doc = original;
      // Every other mutant keeps its JSON types (past the type checks to the range checks).
      for (std::uint64_t k = 0, m = 1 + rng.below(3); k < m; ++k)
        i % 2 == 0 ? meshsim::test::mutate_typed(doc, rng) : meshsim::test::mutate(doc, rng);
      try {
        const auto s = read_stack(JsonRef::root(doc, path));
        for (auto d : kAllDTypes) CHECK(s.grad_reduce_bytes(d) > 0);
      } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos);
        CHECK(msg.starts_with(path));
        ++errors;
      }
    }
    CHECK(errors > 20);
  }
}

TEST_CASE("an eager RMSNorm is priced as its kernels") {
  // torchtitan's composite nn.RMSNorm: 8 elementwise kernels moving 10× the fused kernel's bytes
  // (fused: read x, write y = 4 B per element; composite: 40, software-stacks.md §1.2/§1.5).
  const auto m = model("llama3.1-8b");
  LayerShape shape;
  shape.seq = 4096;
  const auto ops = layer_ops(m, 0, shape, {});
  const OpSpec& norm = ops.front();
  REQUIRE(norm.name == "input_norm");
  const double elems = 4096.0 * 4096;
  CHECK(norm.forward.bytes == 4 * elems);
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto eager = price_op(norm, {cm, *bundled_stack("torchtitan"), nullptr, {}});
  const double each = cm.seconds(memory_kernel(MemoryClass::elementwise, 40 * elems / 8));
  CHECK(eager.forward.time.seconds() == doctest::Approx(8 * each).epsilon(1e-6));
  // Megatron (TE) runs it as the catalogue's one norm kernel.
  const auto fused = price_op(norm, {cm, *bundled_stack("megatron"), nullptr, {}});
  CHECK(fused.forward.time.seconds() == doctest::Approx(cm.seconds(norm.forward)).epsilon(1e-6));
  CHECK(eager.forward.time > fused.forward.time * 3);
  // torchtitan's separate wq, wk, wv: three GEMMs of N = 4096, 1024, 1024 instead of one 6144.
  const OpSpec& qkv = ops[1];
  REQUIRE(qkv.name == "qkv_proj");
  const auto parts = price_op(qkv, {cm, *bundled_stack("torchtitan"), nullptr, {}});
  const double sum = cm.seconds(gemm_kernel({4096, 4096, 4096, 1}, DType::bf16)) +
                     2 * cm.seconds(gemm_kernel({4096, 1024, 4096, 1}, DType::bf16));
  CHECK(parts.forward.time.seconds() == doctest::Approx(sum).epsilon(1e-6));
}

TEST_CASE("FP8 quantization kernels around a layer's GEMMs (Transformer Engine)") {
  // Llama 3.1 8B at 4096 tokens on TP 2 with sequence parallelism, FP8 GEMMs, Megatron's stack.
  // QKV (N = 6144/2) and FC1 (N = 2·14336/2) take the FP8 output of a fused norm, gathered in FP8:
  // only its transpose (2 B an element of the 4096 × 4096 input). The output projection and FC2
  // quantize their 16-bit inputs (4096 × 2048 and 4096 × 7168) by cast_transpose (4 B). Output
  // gradients: cast_transpose (4 B) of QKV's 4096 × 3072 and FC1's 4096 × 14336; the
  // row-parallel ones (4096 × 4096) are cast on the 2048-token shard before their FP8
  // all-gather (3 B) and transposed after it (2 B).
  const auto m = model("llama3.1-8b");
  LayerShape shape;
  shape.seq = 4096;
  shape.dtype = DType::fp8;
  const auto ops = fp8_layer(2, true);
  const auto& mg = *bundled_stack("megatron");
  const auto of = [&](const char* name) { return fp8_cast_kernels(named(ops, name), mg, 2, true); };
  const double s = 4096;
  CHECK(bytes(of("qkv_proj").forward) == std::vector{2 * s * 4096});
  CHECK(bytes(of("qkv_proj").dgrad) == std::vector{4 * s * 3072});
  CHECK(bytes(of("mlp_up").forward) == std::vector{2 * s * 4096});
  CHECK(bytes(of("mlp_up").dgrad) == std::vector{4 * s * 14336});
  CHECK(bytes(of("out_proj").forward) == std::vector{4 * s * 2048});
  CHECK(bytes(of("out_proj").dgrad) == std::vector{3 * s / 2 * 4096, 2 * s * 4096});
  CHECK(bytes(of("mlp_down").forward) == std::vector{4 * s * 7168});
  CHECK(bytes(of("mlp_down").dgrad) == std::vector{3 * s / 2 * 4096, 2 * s * 4096});
  for (const auto& k : of("out_proj").dgrad) CHECK(k.memory_class == MemoryClass::elementwise);
  // Without SP the row-parallel output gradient is whole on every rank: one cast_transpose.
  const auto no_sp = layer_ops(m, 0, shape, {2, false, 1, 1});
  CHECK(bytes(fp8_cast_kernels(named(no_sp, "out_proj"), mg, 2, false).dgrad) ==
        std::vector{4 * s * 4096});
  // A shared expert's output gradient in an MoE layer is gathered in 16 bits (MoE gathers keep
  // them), so it is cast whole: DeepSeek-V3's shared FC2 on TP 2, 4096 tokens × 7168.
  const auto ds = model("deepseek-v3");
  const auto moe_layer = layer_ops(ds, ds.layers - 1, shape, {2, true, 1, 1});
  CHECK(bytes(fp8_cast_kernels(named(moe_layer, "shared_expert_down"), mg, 2, true).dgrad) ==
        std::vector{4 * s * 7168});
  // Priced into the op's passes: the forward grows by the cast kernel's time.
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto out = named(ops, "out_proj");
  const auto with = price_op(out, {cm, mg, nullptr, {}, 2, true});
  const auto without = price_op(out, {cm, *bundled_stack("ideal"), nullptr, {}, 2, true});
  CHECK(with.forward.time.seconds() - without.forward.time.seconds() ==
        doctest::Approx(cm.seconds(memory_kernel(MemoryClass::elementwise, 4 * s * 2048)))
            .epsilon(1e-6));
  CHECK(with.forward.kernels == without.forward.kernels + 1);
  CHECK(with.dgrad.kernels == without.dgrad.kernels + 2);
  CHECK(with.wgrad.time == without.wgrad.time);
  CHECK(with.forward.model_flops == without.forward.model_flops);
  // None in 16-bit runs, none for stacks that list none, none for the 16-bit output layer.
  shape.dtype = DType::bf16;
  for (const auto& op : layer_ops(m, 0, shape, {2, true, 1, 1})) {
    CHECK(fp8_cast_kernels(op, mg, 2, true).forward.empty());
    CHECK(fp8_cast_kernels(op, mg, 2, true).dgrad.empty());
  }
  shape.dtype = DType::fp8;
  for (const auto& op : ops) {
    CHECK(fp8_cast_kernels(op, *bundled_stack("ideal"), 2, true).forward.empty());
    CHECK(fp8_cast_kernels(op, *bundled_stack("ideal"), 2, true).dgrad.empty());
  }
  for (const auto& op : head_ops(m, shape, {2, true, 1, 1}))
    CHECK(fp8_cast_kernels(op, mg, 2, true).forward.empty());
}

TEST_CASE("FP8 quantization kernels with dynamic scaling (torchao Float8Linear, torchtitan)") {
  // Llama 3.1 8B at 4096 tokens, TP 1, FP8 GEMMs, the torchtitan stacks. Each tensor's scale is
  // its own amax: a reduction reads it (2 B an element), then cast_transpose (4 B). The output
  // projection (K = N = 4096) casts its 4096 × 4096 weight (2 then 4 B) and its 4096 × 4096
  // input (2 then 4 B) before the forward GEMM, and its 4096 × 4096 output gradient (2 then 4 B)
  // before dgrad. FC1 (K = 4096, N = 2·14336): weight 4096 × 28672, input 4096 × 4096, output
  // gradient 4096 × 28672. FC2: weight and output gradient 14336 × 4096 and 4096 × 4096, input
  // 4096 × 14336.
  const auto ops = fp8_layer(1, false);
  const double s = 4096, f = 14336;
  for (const char* stack : {"torchtitan", "torchtitan-compile"}) {
    CAPTURE(stack);
    const auto& st = *bundled_stack(stack);
    const auto out = fp8_cast_kernels(named(ops, "out_proj"), st, 1, false);
    CHECK(bytes(out.forward) ==
          std::vector{2 * 4096 * s, 4 * 4096 * s, 2 * s * 4096, 4 * s * 4096});
    CHECK(out.forward_labels ==
          std::vector<std::string_view>{"weight_amax", "weight_cast", "amax", "cast"});
    CHECK(bytes(out.dgrad) == std::vector{2 * s * 4096, 4 * s * 4096});
    CHECK(out.dgrad_labels == std::vector<std::string_view>{"amax", "cast"});
    const auto up = fp8_cast_kernels(named(ops, "mlp_up"), st, 1, false);
    CHECK(bytes(up.forward) ==
          std::vector{2 * 4096 * 2 * f, 4 * 4096 * 2 * f, 2 * s * 4096, 4 * s * 4096});
    CHECK(bytes(up.dgrad) == std::vector{2 * s * 2 * f, 4 * s * 2 * f});
    const auto down = fp8_cast_kernels(named(ops, "mlp_down"), st, 1, false);
    CHECK(bytes(down.forward) == std::vector{2 * f * 4096, 4 * f * 4096, 2 * s * f, 4 * s * f});
    CHECK(bytes(down.dgrad) == std::vector{2 * s * 4096, 4 * s * 4096});
    for (const auto& k : down.forward) CHECK(k.memory_class == MemoryClass::elementwise);
  }
  CHECK(bytes_per_element(Fp8Cast::amax_cast_transpose) == 6);
  CHECK(kernel_bytes_per_element(Fp8Cast::amax_cast_transpose) == std::vector<double>{2, 4});
  CHECK(kernel_bytes_per_element(Fp8Cast::cast_transpose) == std::vector<double>{4});
  CHECK(kernel_bytes_per_element(Fp8Cast::none).empty());
  // TP 2 with sequence parallelism (torchao's Float8 tensor parallelism): the column-parallel
  // QKV's 4096 × 4096 input is quantized on its 2048-token shard before the FP8 all-gather (amax
  // 2 B, cast 3 B an element of the shard) and transposed after it (2 B); the row-parallel
  // output projection's 4096 × 4096 output gradient the same. Its input (4096 × 2048, local)
  // and QKV's output gradient (4096 × 3072) are cast whole (2 then 4 B).
  const auto tp2 = fp8_layer(2, true);
  const auto& tt = *bundled_stack("torchtitan-compile");
  const auto qkv = fp8_cast_kernels(named(tp2, "qkv_proj"), tt, 2, true);
  CHECK(bytes(qkv.forward) == std::vector{2 * 4096 * 3072.0, 4 * 4096 * 3072.0, 2 * s / 2 * 4096,
                                          3 * s / 2 * 4096, 2 * s * 4096});
  CHECK(qkv.forward_labels ==
        std::vector<std::string_view>{"weight_amax", "weight_cast", "amax", "cast", "cast"});
  CHECK(bytes(qkv.dgrad) == std::vector{2 * s * 3072, 4 * s * 3072});
  const auto out2 = fp8_cast_kernels(named(tp2, "out_proj"), tt, 2, true);
  CHECK(bytes(out2.forward) ==
        std::vector{2 * 2048 * 4096.0, 4 * 2048 * 4096.0, 2 * s * 2048, 4 * s * 2048});
  CHECK(bytes(out2.dgrad) == std::vector{2 * s / 2 * 4096, 3 * s / 2 * 4096, 2 * s * 4096});
  // Without SP the input and the gradient are whole on every rank: cast whole.
  CHECK(bytes(fp8_cast_kernels(named(fp8_layer(2, false), "out_proj"), tt, 2, false).dgrad) ==
        std::vector{2 * s * 4096, 4 * s * 4096});
  // Transformer Engine keeps its FP8 weights across a step's micro-batches: no weight cast.
  const auto te = fp8_cast_kernels(named(ops, "out_proj"), *bundled_stack("megatron"), 1, false);
  CHECK(te.forward_labels == std::vector<std::string_view>{"cast"});
}

TEST_CASE("torchao's float8 all-gather: FSDP gathers the FP8 linears' weights in one byte") {
  // Llama 3.1 8B at 4096 tokens, TP 1, FP8 GEMMs, torchtitan-compile with the float8 all-gather
  // on. The block linears' weights arrive from FSDP in FP8, cast on each shard (trace_builder's
  // gather_layer): the forward GEMM needs no weight cast, and dgrad's transposed weight is a
  // copy of one-byte elements (2 B an element: the output projection's 4096 × 4096, FC1's
  // 4096 × 28672). Inputs and output gradients are cast as without it.
  const auto ops = fp8_layer(1, false);
  const double s = 4096, f = 14336;
  const auto st =
      with_fp8_fsdp_all_gather(*bundled_stack("torchtitan-compile"), Fp8FsdpAllGather::dynamic);
  CHECK(st.name == "torchtitan-compile +fp8-fsdp-all-gather");
  CHECK(with_fp8_fsdp_all_gather(st, Fp8FsdpAllGather::dynamic).name == st.name);
  CHECK(gathered_weight_bytes(10, 4) == 6 * 2 + 4 * 1);  // 16-bit rest, one-byte FP8 linears
  CHECK(gathered_weight_bytes(10, 0) == 20);
  // Megatron's FP8 parameters (--fp8-param-gather) gather the same linears in FP8, and replace
  // an FP8 FSDP all-gather (the two are exclusive); they keep the stack's listed weight casts
  // (Transformer Engine: none, its FP8 weights are cast once a step).
  const auto mg = with_fp8_params(*bundled_stack("megatron"));
  CHECK(mg.name == "megatron +fp8-params");
  CHECK(with_fp8_params(mg).name == mg.name);
  CHECK(with_fp8_params(
            with_fp8_fsdp_all_gather(*bundled_stack("megatron"), Fp8FsdpAllGather::dynamic))
            .fp8_fsdp_all_gather == Fp8FsdpAllGather::none);
  CHECK(!with_fp8_fsdp_all_gather(mg, Fp8FsdpAllGather::dynamic).fp8_params);
  CHECK(fsdp_gathers_fp8(mg, named(ops, "out_proj")));
  CHECK(!fsdp_gathers_fp8(mg, named(ops, "input_norm")));
  CHECK(fp8_cast_kernels(named(ops, "out_proj"), mg, 1, false, true).forward_labels ==
        fp8_cast_kernels(named(ops, "out_proj"), *bundled_stack("megatron"), 1, false, false)
            .forward_labels);
  CHECK(fp8_cast_kernels(named(ops, "out_proj"), mg, 1, false, true).dgrad_labels ==
        std::vector<std::string_view>{"cast"});
  const auto out = fp8_cast_kernels(named(ops, "out_proj"), st, 1, false, true);
  CHECK(bytes(out.forward) == std::vector{2 * s * 4096, 4 * s * 4096});
  CHECK(out.forward_labels == std::vector<std::string_view>{"amax", "cast"});
  CHECK(bytes(out.dgrad) == std::vector{2 * 4096 * s, 2 * s * 4096, 4 * s * 4096});
  CHECK(out.dgrad_labels == std::vector<std::string_view>{"weight_transpose", "amax", "cast"});
  CHECK(bytes(fp8_cast_kernels(named(ops, "mlp_up"), st, 1, false, true).dgrad) ==
        std::vector{2 * 4096 * 2 * f, 2 * s * 2 * f, 4 * s * 2 * f});
  // Without FSDP gathering the weights (no shard group) each forward casts them as before.
  CHECK(fp8_cast_kernels(named(ops, "out_proj"), st, 1, false, false).forward_labels ==
        std::vector<std::string_view>{"weight_amax", "weight_cast", "amax", "cast"});
  // Which weights gather in FP8: the dense FP8 GEMMs'. Norms, the 16-bit head, a 16-bit run's
  // GEMMs and an MoE's routed experts (their grouped weights) gather 16 bits.
  for (const auto& op : ops) {
    CAPTURE(op.name);
    const bool linear = op.forward.kind == KernelKind::gemm && op.weight_params > 0;
    CHECK(fsdp_gathers_fp8(st, op) == linear);
    CHECK(fsdp_gathered_bytes(gathers_fp8_weights(st), op) == (linear ? 1.0 : 2.0));
    CHECK(!fsdp_gathers_fp8(*bundled_stack("torchtitan-compile"), op));
  }
  LayerShape shape;
  shape.seq = 4096;
  shape.dtype = DType::fp8;
  const auto m = model("llama3.1-8b");
  for (const auto& op : head_ops(m, shape, {}))
    CHECK(fsdp_gathered_bytes(gathers_fp8_weights(st), op) == 2.0);
  shape.dtype = DType::bf16;
  CHECK(!fsdp_gathers_fp8(st, named(layer_ops(m, 0, shape, {}), "mlp_up")));
  shape.dtype = DType::fp8;
  const auto mx = model("mixtral-8x7b");
  CHECK(!fsdp_gathers_fp8(st, named(layer_ops(mx, 0, shape, {}), "expert_up")));
  CHECK(fsdp_gathers_fp8(st, named(layer_ops(mx, 0, shape, {}), "qkv_proj")));
}

TEST_CASE("fp8_casts names exactly the catalogue's GEMM ops with weights") {
  // Every GEMM op with weights of a dense, an MoE and an MLA model (with and without a query
  // LoRA) is a name the loader accepts, and every accepted name is such an op.
  std::set<std::string> gemms;
  const auto collect = [&](const ModelSpec& m) {
    LayerShape shape;
    shape.seq = 256;
    for (std::int64_t l : {std::int64_t{0}, m.layers - 1})
      for (const auto& op : layer_ops(m, l, shape, {}))
        if (op.forward.kind == KernelKind::gemm && op.weight_params > 0 && op.name != "router")
          gemms.insert(op.name);
  };
  collect(model("llama3.1-8b"));
  collect(model("mixtral-8x7b"));
  collect(model("deepseek-v3"));
  Json doc = load_json_file(source_path("workloads/models/deepseek-v3.json"));
  doc.erase("q_lora_rank");
  collect(read_model(JsonRef::root(doc, "no-q-lora.json")));
  const std::set<std::string> accepted(kFp8GemmOps.begin(), kFp8GemmOps.end());
  CHECK(gemms == accepted);
  // The megatron stack lists every one of them.
  for (const auto name : kFp8GemmOps)
    CHECK_MESSAGE(bundled_stack("megatron")->fp8_casts_of(name), name);
}

TEST_CASE("the loss as each stack runs it") {
  // Llama 3.1 8B at 4096 tokens, TP 1: 4096 × 128256 logits. The catalogue's fused loss moves
  // 6 B per logit each way (16-bit logits in, fp32 softmax kept; 16-bit gradients out).
  const auto m = model("llama3.1-8b");
  LayerShape shape;
  shape.seq = 4096;
  const auto head = head_ops(m, shape, {});
  const OpSpec& loss = head.back();
  REQUIRE(loss.name == "loss");
  const double logits = 4096.0 * 128256;
  CHECK(loss.forward.bytes == doctest::Approx(6 * logits));
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  const auto priced = [&](const char* stack) {
    return price_op(loss, {cm, *bundled_stack(stack), nullptr, {}});
  };
  const auto each = [&](double bytes_per_logit, int kernels) {
    return kernels *
           cm.seconds(memory_kernel(MemoryClass::softmax, bytes_per_logit * logits / kernels));
  };
  // Megatron's unfused vocabulary-parallel cross entropy: cast (2 + 4), max (4), subtract (4 + 4),
  // exp (4 + 4), sum (4), divide (4 + 4) = 38 B in 6 kernels; backward multiply (4 + 4) and cast
  // back (4 + 2) = 14 B in 2 (the file rounds the factors to 6.33 and 2.33 of the fused 6).
  const auto meg = priced("megatron");
  CHECK(meg.forward.time.seconds() == doctest::Approx(each(6 * 6.33, 6)).epsilon(1e-6));
  CHECK(meg.forward.time.seconds() == doctest::Approx(each(38, 6)).epsilon(1e-3));
  CHECK(meg.dgrad.time.seconds() == doctest::Approx(each(14, 2)).epsilon(1e-3));
  // torchtitan (eager and compiled: the loss is outside the compiled blocks) and Hugging Face
  // under DeepSpeed: cast (2 + 4) and log_softmax (4 + 4) = 14 B in 2; backward the zero-filled
  // nll gradient (4), log_softmax_backward (4 + 4 + 4) and the cast back (4 + 2) = 22 B in 3.
  for (const char* stack : {"torchtitan", "torchtitan-compile", "deepspeed"}) {
    const auto t = priced(stack);
    CHECK(t.forward.time.seconds() == doctest::Approx(each(14, 2)).epsilon(1e-3));
    CHECK(t.dgrad.time.seconds() == doctest::Approx(each(22, 3)).epsilon(1e-3));
  }
  // The ideal stack keeps the fused kernel, and so does a stack asked for it.
  CHECK(priced("ideal").forward.time.seconds() ==
        doctest::Approx(cm.seconds(loss.forward)).epsilon(1e-9));
  const Stack fused = with_fused_loss(*bundled_stack("megatron"));
  CHECK(fused.name == "megatron +fused-loss");
  CHECK(price_op(loss, {cm, fused, nullptr, {}}).forward.time.seconds() ==
        doctest::Approx(cm.seconds(loss.forward)).epsilon(1e-9));
  CHECK(with_fused_loss(*bundled_stack("ideal")).name == "ideal");
  CHECK(runs_fused_loss(fused));
  CHECK(runs_fused_loss(*bundled_stack("ideal")));
  CHECK_FALSE(runs_fused_loss(*bundled_stack("megatron")));
  CHECK_FALSE(runs_fused_loss(*bundled_stack("torchtitan-compile")));
}

TEST_CASE("a measured launch gap is paid once per kernel") {
  // A profile whose harness `launch` section measured 1.5 µs between kernels launched one by one:
  // torchtitan's eager RMSNorm (8 kernels) pays it 8 times, its separate wq, wk, wv 3 times,
  // Megatron's fused norm once. Without the measurement nothing is added.
  const auto m = model("llama3.1-8b");
  LayerShape shape;
  shape.seq = 4096;
  const auto ops = layer_ops(m, 0, shape, {});
  const OpSpec& norm = ops[0];
  const OpSpec& qkv = ops[1];
  REQUIRE(qkv.name == "qkv_proj");
  const auto gpu = *find_gpu("H100-SXM5-80GB");
  const ComputeModel plain(gpu);
  CHECK(plain.kernel_gap_s() == 0);
  CalibrationProfile measured;
  measured.gpu = gpu.model;
  measured.source = "test";
  measured.kernel_gap_s = 1.5e-6;
  const ComputeModel gapped(gpu, measured);
  CHECK(gapped.kernel_gap_s() == 1.5e-6);
  const auto added = [&](const OpSpec& op, const char* stack) {
    const auto& st = *bundled_stack(stack);
    return (price_op(op, {gapped, st, nullptr, {}}).forward.time -
            price_op(op, {plain, st, nullptr, {}}).forward.time)
        .seconds();
  };
  // Each kernel's time is rounded up to a picosecond on its own: a few ps of slack.
  CHECK(added(norm, "torchtitan") == doctest::Approx(8 * 1.5e-6).epsilon(1e-6));
  CHECK(added(qkv, "torchtitan") == doctest::Approx(3 * 1.5e-6).epsilon(1e-6));
  CHECK(added(norm, "megatron") == doctest::Approx(1.5e-6).epsilon(1e-6));
  CHECK(added(qkv, "megatron") == doctest::Approx(1.5e-6).epsilon(1e-6));
}

TEST_CASE("a GEMM beside a collective is slowed by the SMs its CTAs take") {
  // One wave: 132 tiles of 128×256 (K = 8192: 128 main-loop iterations each) on a 132-SM H100.
  // Launched for all 132 SMs, its stream-K split gives each of 132 CTAs 128 iterations. An
  // all-gather's 24 CTAs leave 108 SMs: the CTAs take two rounds, 2× the time (the NVIDIA forum
  // case of software-stacks.md §2.2), not the 132/108 = 1.22× of the throughput share.
  const auto gpu = *find_gpu("H100-SXM5-80GB");
  REQUIRE(gpu.sm_count == 132);
  const GemmShape one_wave{128 * 12, 256 * 11, 8192, 1};
  CHECK(gemm_tile_use(one_wave, 132)[0] == doctest::Approx(1.0));
  CHECK(gemm_tile_use(one_wave, 132, {24, true})[0] == doctest::Approx(0.5));
  // Launched for the 108 SMs left (TE's pipelined RS): 132·128 iterations over 108 SMs,
  // ⌈156.4⌉ = 157 each: 128/157 of the whole GPU.
  CHECK(gemm_tile_use(one_wave, 132, {24, false})[0] == doctest::Approx(128.0 / 157));
  // Many waves: 8192² in 2048 tiles of 128×256. Stream-K keeps 14 whole waves data-parallel
  // (1848 tiles) and splits 200 tiles' 25,600 iterations over 132 CTAs (194 each). On 108 SMs:
  // ⌈1848/108⌉ = 18 waves of 128 iterations + 2 rounds of 194 = 2692 against 1986 alone.
  const GemmShape square{8192, 8192, 8192, 1};
  CHECK(gemm_tile_use(square, 132, {24, true})[0] ==
        doctest::Approx(2048.0 * 128 / (2692.0 * 132)));
  const ComputeModel cm(gpu), cm_fewer(gpu, std::nullopt, SmsTaken{24, true});
  const auto k = gemm_kernel(one_wave, DType::bf16);
  const double factor = cm_fewer.model_seconds(k) / cm.model_seconds(k);
  // The compute term of the softened roofline doubles (occupancy 1 → 0.5 for every tile of the
  // menu); the fixed cost and the memory traffic do not.
  const auto& g = cm.params().gemm;
  const double compute = k.flops / (989e12 * g.fraction_16bit * 8192 / (8192 + g.k_half));
  const double memory = k.bytes / (gpu.hbm_Bps * g.memory_fraction);
  const auto soft = [&](double x) {
    return std::pow(std::pow(x, g.sharpness) + std::pow(memory, g.sharpness), 1 / g.sharpness);
  };
  CHECK(cm.model_seconds(k) == doctest::Approx(soft(compute) + g.fixed_s));
  CHECK(factor == doctest::Approx((soft(2 * compute) + g.fixed_s) / (soft(compute) + g.fixed_s)));
  CHECK(factor > 1.5);
  // The plan carries it: the segment's interfered time is its time × that factor.
  OpSpec op;
  op.name = "g";
  op.forward = k;
  const auto c = price_op(op, {cm, *bundled_stack("megatron"), &cm_fewer, {}});
  CHECK(c.forward.interfered.seconds() ==
        doctest::Approx(c.forward.time.seconds() * factor).epsilon(1e-6));
  // Memory-bound kernels keep their time (HBM bandwidth is not an SM share).
  OpSpec add;
  add.name = "attention_residual";
  add.forward = memory_kernel(MemoryClass::elementwise, 1e8);
  const auto a = price_op(add, {cm, *bundled_stack("megatron"), &cm_fewer, {}});
  CHECK(a.forward.interfered == a.forward.time);
  // It is HBM that it shares: its bytes at the achievable bandwidth (the elementwise class's
  // fitted fraction of the specification) are what a collective's traffic can slow.
  const double achievable =
      gpu.hbm_Bps * cm.params().of(MemoryClass::elementwise).bandwidth_fraction;
  CHECK(hbm_achievable_Bps(cm) == doctest::Approx(achievable));
  CHECK(a.forward.hbm_s == doctest::Approx(1e8 / achievable));
  CHECK(a.forward.hbm_s < a.forward.time.seconds());  // the class's fixed cost is not traffic
  // A GEMM streams its operands for a part of its time (here 80 MB of A, B and C against ~0.1 ms).
  CHECK(c.forward.hbm_s == doctest::Approx(k.bytes / achievable));
  CHECK(c.forward.hbm_s < 0.3 * c.forward.time.seconds());
}

TEST_CASE(
    "the bundled stacks' CP exchange is their framework's default, and --cp-comm overrides it") {
  // Megatron-LM --cp-comm-type p2p; torchtitan context_parallel_rotate_method "allgather".
  CHECK(bundled_stack("megatron")->cp_comm == CpComm::ring);
  CHECK(bundled_stack("torchtitan")->cp_comm == CpComm::allgather);
  CHECK(bundled_stack("torchtitan-compile")->cp_comm == CpComm::allgather);
  CHECK(bundled_stack("deepspeed")->cp_comm == CpComm::ring);
  CHECK(bundled_stack("ideal")->cp_comm == CpComm::ring);
  const auto gathered = with_cp_comm(*bundled_stack("megatron"), CpComm::allgather);
  CHECK(gathered.cp_comm == CpComm::allgather);
  CHECK(gathered.name == "megatron");  // the step's header names the exchange instead
  CHECK(name_of(CpComm::ring) == "ring");
  CHECK(name_of(CpComm::allgather) == "allgather");
}

TEST_CASE("--ep-dispatch names the stack it makes") {
  const auto& megatron = *bundled_stack("megatron");
  CHECK(megatron.ep_dispatch == EpDispatch::all_to_all);  // Megatron-Core's alltoall dispatcher
  const auto deepep = with_ep_dispatch(megatron, EpDispatch::deepep);
  CHECK(deepep.name == "megatron +deepep");
  CHECK(deepep.ep_dispatch == EpDispatch::deepep);
  // Asking for what the stack does already changes nothing, name included.
  CHECK(with_ep_dispatch(megatron, EpDispatch::all_to_all).name == "megatron");
  CHECK(with_ep_dispatch(deepep, EpDispatch::all_to_all).name == "megatron +deepep +all_to_all");
}

TEST_CASE("recompute modules: Megatron's --recompute-modules as regions, strictly loaded") {
  const auto& mg = *bundled_stack("megatron");
  const auto p = module_policy(mg, {"moe_act", "layernorm"}, "--recompute-modules");
  CHECK(p.mode == Recompute::selective);
  CHECK(p.modules == std::vector<std::string>{"moe_act", "layernorm"});
  REQUIRE(p.units.size() == 3);  // moe_act's one region, then layernorm's two
  CHECK(p.units[0].frees == std::vector<std::string>{"expert_down"});
  CHECK(p.units[2].frees == std::vector<std::string>{"router.input"});
  CHECK(meshsim::test::error_of([&] { module_policy(mg, {"moe_layer"}, "--recompute-modules"); }) ==
        "--recompute-modules: stack 'megatron' has no recompute module 'moe_layer' (its modules: "
        "core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts)");
  CHECK(meshsim::test::error_of([&] {
          module_policy(mg, {"mlp", "mlp"}, "x");
        }) == "x: module 'mlp' is given twice");
  CHECK(meshsim::test::error_of([&] {
          module_policy(*bundled_stack("torchtitan"), {"mlp"}, "--recompute-modules");
        }) == "--recompute-modules: stack 'torchtitan' has no recompute modules");

  std::string t = kMinimal;
  const std::string end = R"("default_recompute": "none")";
  auto with_modules = [&](const std::string& modules) {
    std::string s = t;
    s.replace(s.find(end), end.size(), end + R"(, "recompute_modules": )" + modules);
    return s;
  };
  const auto s = stack_from(with_modules(R"({"act": [{"ops": ["mlp_activation"],
      "frees": ["mlp_down"], "needs": "mlp_up"}]})"));
  REQUIRE(s.recompute_modules.contains("act"));
  CHECK(s.recompute_modules.at("act")[0] ==
        RecomputeUnit{{"mlp_activation"}, {"mlp_down"}, "mlp_up"});
  CHECK(!s.recompute_modules.at("act")[0].reruns_collectives);
  const auto mlp = stack_from(with_modules(R"({"mlp": [{"ops": ["mlp_up", "mlp_down"],
      "reruns_collectives": true}]})"));
  CHECK(mlp.recompute_modules.at("mlp")[0].reruns_collectives);
  // Megatron's whole-module checkpoints re-run their collectives; the output-discarding ones
  // none.
  for (const auto& module : mg.recompute_modules)
    CHECK_MESSAGE(
        module.second[0].reruns_collectives ==
            (module.first == "mlp" || module.first == "shared_experts" || module.first == "moe"),
        module.first);
  CHECK(error_of(with_modules(R"({"act": [{"ops": ["x"], "reruns_collectives": 1}]})"))
            .starts_with("s.json:/recompute_modules/act/0/reruns_collectives: "));
  CHECK(error_of(with_modules(R"({"act": []})")) ==
        "s.json:/recompute_modules/act: must not be empty");
  CHECK(error_of(with_modules(R"({"act": [{"ops": []}]})")) ==
        "s.json:/recompute_modules/act/0/ops: must not be empty");
  CHECK(error_of(with_modules(R"({"act": [{"ops": [""]}]})")) ==
        "s.json:/recompute_modules/act/0/ops/0: must name an op");
  CHECK(error_of(with_modules(R"({"act": [{"ops": ["x"], "needs": ""}]})")) ==
        "s.json:/recompute_modules/act/0/needs: must name an op");
  CHECK(error_of(with_modules(R"({"act": [{"ops": ["x"], "keep": 1}]})"))
            .starts_with("s.json:/recompute_modules/act/0/keep: unknown key 'keep'"));
  CHECK(!stack_from(t).recompute_block);
  CHECK(bundled_stack("megatron")->recompute_block);
  {
    std::string b = t;
    b.replace(b.find(end), end.size(), end + R"(, "recompute_block": "yes")");
    CHECK(error_of(b).starts_with("s.json:/recompute_block: "));
  }
  CHECK(!stack_from(t).recompute_layer_frequency);
  CHECK(bundled_stack("torchtitan")->recompute_layer_frequency);
  {
    std::string b = t;
    b.replace(b.find(end), end.size(), end + R"(, "recompute_layer_frequency": "yes")");
    CHECK(error_of(b) == "s.json:/recompute_layer_frequency: expected true or false, found string");
  }
  CHECK(error_of(with_modules("[]")) ==
        "s.json:/recompute_modules: must be an object of module names, each a list of regions");
}

TEST_CASE("pipeline split: the frameworks' splits as data, strictly loaded") {
  std::string t = kMinimal;
  auto with_split = [&](const std::string& split) {
    std::string s = t;
    const std::string from = R"("name": "x",)";
    s.replace(s.find(from), from.size(), R"("name": "x", "pipeline_split": )" + split + ",");
    return s;
  };
  // Absent: meshsim's own split balanced by time (the ideal stack's).
  CHECK(stack_from(t).pipeline_split == PipelineSplit{});
  const auto tt =
      stack_from(with_split(R"({"method": "even", "embedding_layers": 1, "loss_layers": 1})"))
          .pipeline_split;
  CHECK(tt == PipelineSplit{PipelineSplitMethod::even, 1, 1, false});
  CHECK(stack_from(with_split(R"({"method": "even", "must_divide": true})")).pipeline_split ==
        PipelineSplit{PipelineSplitMethod::even, 0, 0, true});
  CHECK(error_of(with_split(R"({"method": "balanced", "loss_layers": 1})")) ==
        "s.json:/pipeline_split/loss_layers: only an even split takes it (method is balanced)");
  CHECK(error_of(with_split(R"({"method": "parameters", "must_divide": true})")) ==
        "s.json:/pipeline_split/must_divide: only an even split takes it (method is parameters)");
  CHECK(error_of(with_split(R"({"method": "by-hand"})"))
            .starts_with("s.json:/pipeline_split/method: unknown pipeline split method 'by-hand'"));
  CHECK(error_of(with_split(R"({"method": "even", "embedding_layers": 9})"))
            .starts_with("s.json:/pipeline_split/embedding_layers:"));
  CHECK(stack_from(with_split(R"({"method": "even", "end_switches": "weights"})")).pipeline_split ==
        PipelineSplit{PipelineSplitMethod::even, 0, 0, false, EndSwitches::weights});
  CHECK(error_of(with_split(R"({"method": "balanced", "end_switches": "layers"})")) ==
        "s.json:/pipeline_split/end_switches: only an even split takes it (method is balanced)");
  CHECK(error_of(with_split(R"({"method": "even", "end_switches": "both"})"))
            .starts_with("s.json:/pipeline_split/end_switches: unknown end switches 'both'"));
  CHECK(error_of(with_split(R"({"method": "even", "stages": 4})"))
            .starts_with("s.json:/pipeline_split/stages: unknown key 'stages'"));
  // The bundled stacks say what their frameworks run.
  CHECK(bundled_stack("megatron")->pipeline_split ==
        PipelineSplit{PipelineSplitMethod::even, 0, 0, true, EndSwitches::layers});
  CHECK(bundled_stack("torchtitan")->pipeline_split ==
        PipelineSplit{PipelineSplitMethod::even, 1, 1, false, EndSwitches::weights});
  CHECK(bundled_stack("torchtitan-compile")->pipeline_split ==
        bundled_stack("torchtitan")->pipeline_split);
  CHECK(bundled_stack("deepspeed")->pipeline_split.method == PipelineSplitMethod::parameters);
  CHECK(bundled_stack("ideal")->pipeline_split.method == PipelineSplitMethod::balanced);
}

TEST_CASE("pipeline split: an even split with weighed ends, by hand") {
  using V = std::vector<std::int64_t>;
  // Llama 3 405B (2407.21783 §3.3.2): 126 layers + 2 = 128 units on 16 stages of 8, the first
  // and last one layer fewer.
  V llama(16, 8);
  llama.front() = llama.back() = 7;
  CHECK(even_chunk_layers(126, 16, 1, 1) == llama);
  // torchtitan's generate_llm_fqn_per_model_part: 34 units on 3 stages → 12, 11, 11 units; less
  // the embedding on the first and the output on the last: 11, 11, 10.
  CHECK(even_chunk_layers(32, 3, 1, 1) == V{11, 11, 10});
  // Megatron's plain even split, and its remainder given to the first chunks: 61 on 8 → 5 × 8,
  // 3 × 7.
  CHECK(even_chunk_layers(64, 8, 0, 0) == V(8, 8));
  CHECK(even_chunk_layers(61, 8, 0, 0) == V{8, 8, 8, 8, 8, 7, 7, 7});
  // One chunk holds everything; an end that would keep no layer drops the weights: 4 layers +
  // 2 on 4 chunks would be 2 − 1, 2, 1, 1 − 1.
  CHECK(even_chunk_layers(32, 1, 1, 1) == V{32});
  CHECK(even_chunk_layers(4, 4, 1, 1) == V{1, 1, 1, 1});
  CHECK_THROWS_AS(even_chunk_layers(4, 5, 0, 0), Error);
}

TEST_CASE("pipeline split: a framework that needs the units to divide weighs the ends to divide") {
  const PipelineSplit mg{PipelineSplitMethod::even, 0, 0, true};
  // 126 layers on 16 chunks: 126 no, 128 with both ends weighed (NeMo's Llama 3.1 405B recipe).
  CHECK(runnable_split(mg, 126, 16) == PipelineSplit{PipelineSplitMethod::even, 1, 1, true});
  // 127 on 16: the embedding alone makes 128; 61 on 2: the embedding alone, 62.
  CHECK(runnable_split(mg, 127, 16) == PipelineSplit{PipelineSplitMethod::even, 1, 0, true});
  CHECK(runnable_split(mg, 61, 2) == PipelineSplit{PipelineSplitMethod::even, 1, 0, true});
  // Dividing already, or nothing divides (61 on 8: 61, 62, 63 all no): the stack's own.
  CHECK(runnable_split(mg, 128, 16) == mg);
  CHECK(runnable_split(mg, 61, 8) == mg);
  // An end weighed to a whole chunk would keep no layer: 2 layers on 4 chunks (4 units) is not.
  CHECK(runnable_split(mg, 2, 4) == mg);
  // A framework that splits any count (torchtitan's) keeps its own.
  const PipelineSplit tt{PipelineSplitMethod::even, 1, 1, false};
  CHECK(runnable_split(tt, 127, 16) == tt);
}

TEST_CASE("pipeline split: Megatron's uneven split, the ends taking what the middle leaves") {
  using V = std::vector<std::int64_t>;
  // 61 layers on 8 stages: middle ceil(61 / 8) = 8 each, 61 − 48 = 13 for the ends, 7 and 6.
  CHECK(uneven_ends_chunk_layers(61, 8) == V{7, 8, 8, 8, 8, 8, 8, 6});
  // Two stages: the ends are all of it, the first one more.
  CHECK(uneven_ends_chunk_layers(33, 2) == V{17, 16});
  // Dividing layers, one stage, or ends left with nothing (9 on 8: middle 2, ends −3): none.
  CHECK(uneven_ends_chunk_layers(64, 8).empty());
  CHECK(uneven_ends_chunk_layers(61, 1).empty());
  CHECK(uneven_ends_chunk_layers(9, 8).empty());
}
