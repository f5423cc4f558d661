#include "memory/memory_model.hpp"

#include <doctest/doctest.h>

#include "core/error.hpp"
#include "model/model_loader.hpp"
#include "model/op_catalogue.hpp"
#include "stack/stack.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {

ModelSpec bundled(const std::string& name) {
  return load_model(source_path("workloads/models/" + name + ".json"));
}

ModelSpec seventy_b() {
  const auto doc = Json::parse(R"({"params": 7e10})");
  return read_model(JsonRef::root(doc, "dense-70b.json"));
}

MemoryBreakdown train(const ModelSpec& m, const std::string& mesh, std::int32_t zero,
                      TrainingMemoryJob job = {4096, 0, 1, DType::bf16, {}},
                      Recompute rc = Recompute::none, Schedule sched = {}) {
  ParallelConfig c;
  c.mesh = parse_mesh(mesh, "--mesh");
  c.zero = zero;
  c.sp = c.mesh.tp > 1;
  c.recompute = rc;
  c.schedule = sched;
  if (job.global_batch == 0) job.global_batch = c.mesh.dp * job.micro_batch;
  return worst_stage(training_memory_per_stage(m, job, c, {}));
}

// A GPT of 8 Korthikanti layers: h = 1024, 16 heads, GELU MLP, LayerNorm, dropout, biases.
ModelSpec gpt8() {
  const auto doc = Json::parse(R"({"hidden": 1024, "layers": 8, "heads": 16, "vocab": 5120,
                                   "max_positions": 2048})");
  return read_model(JsonRef::root(doc, "gpt.json"));
}

}  // namespace

TEST_CASE("worst_stage and stages_within: the largest total, and each stage against a capacity") {
  // Stages of 30 + 20 = 50 GB, 60 GB, 45 + 5 = 50 GB against 50 GB: the second is over, the
  // others fit exactly.
  MemoryBreakdown a, b, c;
  a.weights = 30e9;
  a.activations = 20e9;
  b.optimizer = 60e9;
  b.stage = 1;
  c.gradients = 45e9;
  c.allocator = 5e9;
  c.stage = 2;
  CHECK(worst_stage({a, b, c}).stage == 1);
  CHECK(stages_within({a, b, c}, 50e9) == std::vector<bool>{true, false, true});
  CHECK(stages_within({}, 50e9).empty());
}

TEST_CASE("seed: model state of a 70B model (ZeRO paper's 2 + 2 + 12 bytes per parameter)") {
  const auto m = seventy_b();
  // 140 GB of BF16 weights; DDP 16Ψ = 1120 GB.
  const auto ddp = train(m, "dp=64", 0);
  CHECK(ddp.weights == 140e9);
  CHECK(ddp.model_state() == 1120e9);
  CHECK_FALSE(ddp.activations_modeled);
  // ZeRO-1 4Ψ + 12Ψ/64 = 293.125 GB; ZeRO-2 2Ψ + 14Ψ/64 = 155.3125 GB; ZeRO-3 16Ψ/64 = 17.5 GB.
  CHECK(train(m, "dp=64", 1).model_state() == doctest::Approx(293.125e9));
  CHECK(train(m, "dp=64", 2).model_state() == doctest::Approx(155.3125e9));
  CHECK(train(m, "dp=64", 3).model_state() == doctest::Approx(17.5e9));
}

TEST_CASE("HSDP: model state is 16Ψ over the shard group, not over all of DP") {
  const auto m = seventy_b();
  // ZeRO-3 over a shard group of 8 of the 64 DP ranks: 16Ψ/8 = 140 GB; of 16: 70 GB; ×cp 2:
  // the shard group is fsdp · cp = 16, 70 GB.
  CHECK(train(m, "dp=64,fsdp=8", 3).model_state() == doctest::Approx(16 * 70e9 / 8));
  CHECK(train(m, "dp=64,fsdp=16", 3).model_state() == doctest::Approx(16 * 70e9 / 16));
  CHECK(train(m, "dp=32,cp=2,fsdp=8", 3).model_state() == doctest::Approx(16 * 70e9 / 16));
  // ZeRO-1 over 8: 4Ψ + 12Ψ/8.
  CHECK(train(m, "dp=64,fsdp=8", 1).model_state() == doctest::Approx(4 * 70e9 + 12 * 70e9 / 8));
}

TEST_CASE("precision recipes are byte counts per state") {
  CHECK(default_recipe(DType::bf16).per_param() == 16);
  CHECK(default_recipe(DType::fp8).per_param() == 17);  // + the fp8 weight copy
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8", "--mesh");
  c.zero = 1;
  MemoryOptions o;
  o.recipe = {2, 2, 0, 4};  // bf16 weights and moments, no master copy
  const auto b = worst_stage(training_memory_per_stage(seventy_b(), {}, c, o));
  CHECK(b.model_state() == doctest::Approx(70e9 * (2 + 2 + 4.0 / 8)));
}

TEST_CASE("seed: KV cache of Llama 3.1 70B") {
  const auto m = bundled("llama3.1-70b");
  // 2 × 80 layers × 8 KV heads × 128 × 2 bytes = 327,680 B ≈ 0.33 MB per token.
  CHECK(kv_bytes_per_token(m, DType::bf16) == 327680);
  ServingMemoryJob job;
  job.context = 32768;
  const auto b = serving_memory(m, job, {});
  // 32,768 tokens ≈ 10.7 GB.
  CHECK(b.kv_cache == 327680.0 * 32768);
  CHECK(b.kv_cache / 1e9 == doctest::Approx(10.7).epsilon(0.005));
  // TP 8: one KV head per rank, an eighth of the cache and of the weights.
  job.tp = 8;
  const auto t8 = serving_memory(m, job, {});
  CHECK(t8.kv_cache == doctest::Approx(b.kv_cache / 8));
  CHECK(t8.weights == doctest::Approx(b.weights / 8));
  // fp8 cache halves it.
  job.kv_dtype = DType::fp8;
  CHECK(serving_memory(m, job, {}).kv_cache == doctest::Approx(t8.kv_cache / 2));
  // MLA caches 512 + 64 values per layer and token.
  CHECK(kv_bytes_per_token(bundled("deepseek-v3"), DType::bf16) == 61.0 * 576 * 2);
}

TEST_CASE("micro-batches in flight per pipeline schedule") {
  const Schedule gpipe{ScheduleKind::gpipe, 1}, ofob{ScheduleKind::one_f_one_b, 1},
      inter{ScheduleKind::interleaved, 2};
  CHECK(microbatches_in_flight(gpipe, 4, 0, 16) == 16);
  CHECK(microbatches_in_flight(ofob, 4, 0, 16) == 4);
  CHECK(microbatches_in_flight(ofob, 4, 3, 16) == 1);
  CHECK(microbatches_in_flight(ofob, 4, 0, 2) == 2);
  // Interleaved, p = 4, v = 2, first stage: p + (p − 1)/v = 5.5 (Korthikanti et al. §4.2.3).
  CHECK(microbatches_in_flight(inter, 4, 0, 16) == 5.5);
  CHECK(microbatches_in_flight(ofob, 1, 0, 16) == 1);
  // The overlapped 1F1B holds the forward of a merged pair beside its backward's micro-batch.
  const Schedule merged{ScheduleKind::one_f_one_b_overlap, 1};
  CHECK(microbatches_in_flight(merged, 1, 0, 16) == 2);
  CHECK(microbatches_in_flight(merged, 1, 0, 1) == 1);
  // A micro-batch group of 5: the first stage warms up 2·(4 − 1) + (2 − 1)·5 = 11 chunks, holds
  // 12 before its first backward: 6 micro-batches' worth. The combined 1F1B holds the same.
  CHECK(microbatches_in_flight({ScheduleKind::interleaved, 2, false, 5}, 4, 0, 10) == 6);
  CHECK(microbatches_in_flight({ScheduleKind::interleaved, 2, true}, 4, 0, 16) == 5.5);
}

TEST_CASE("activations: full recompute keeps 2·s·b·h per layer; 1F1B multiplies by p") {
  const auto m = gpt8();
  const double s = 2048, b = 1, h = 1024, V = 5120;
  LayerShape shape;
  shape.seq = 2048;
  const double embed = totals(embedding_ops(m, shape, {})).saved_bytes;
  const double head = totals(head_ops(m, shape, {})).saved_bytes;
  // Embedding dropout mask s·b·h; final LayerNorm input and logits input, 2·s·b·h each.
  CHECK(embed == s * b * h);
  CHECK(head == 4 * s * b * h);
  const auto full = train(m, "dp=1", 0, {2048, 1, 1, DType::bf16, {}}, Recompute::full);
  CHECK(full.activations == 8 * 2 * s * b * h + embed + head);
  // The loss's fp32 logits are temporary, with 16-bit logits: 6·s·b·V; full recompute also
  // rebuilds one layer (Korthikanti's no-parallelism layer, flash: 34·s·b·h + LSE).
  CHECK(full.temporary == doctest::Approx(6 * s * b * V + 34 * s * b * h + 4 * s * b * 16));
  // Four stages with 1F1B: stage 0 holds 4 micro-batches of its 2 layers and the embedding.
  const auto pp = train(m, "dp=1,pp=4", 0, {2048, 8, 1, DType::bf16, {}}, Recompute::selective);
  const double layer_sel = 34 * s * b * h + 4 * s * b * 16;
  CHECK(pp.stage == 0);
  CHECK(pp.activations == doctest::Approx(4 * (2 * layer_sel + embed)));
}

TEST_CASE("activations: Megatron's block and uniform recompute methods") {
  // A layer keeps 34·s·b·h + its LSE without recompute (flash), its input 2·s·b·h with full
  // recompute.
  const auto m = gpt8();
  const double s = 2048, b = 1, h = 1024, V = 5120;
  LayerShape shape;
  shape.seq = 2048;
  const double ends =
      totals(embedding_ops(m, shape, {})).saved_bytes + totals(head_ops(m, shape, {})).saved_bytes;
  const double layer = 34 * s * b * h + 4 * s * b * 16, input = 2 * s * b * h;
  const auto with = [&](const char* mesh, const char* method, std::int64_t n) {
    ParallelConfig c;
    c.mesh = parse_mesh(mesh, "--mesh");
    c.recompute = Recompute::full;
    set_recompute_method(c, method, n, "--recompute-method");
    const TrainingMemoryJob job{2048, c.mesh.pp * 2, 1, DType::bf16, {}};
    return training_memory_per_stage(m, job, c, {});
  };
  // Block 3 of 8 layers: three keep their input, five everything.
  const auto block = with("dp=1", "block", 3)[0];
  CHECK(block.activations == doctest::Approx(3 * input + 5 * layer + ends));
  CHECK(block.temporary == doctest::Approx(6 * s * b * V + layer));
  // Uniform groups of 3: layers 0, 3 and 6 keep the groups' inputs; backward rebuilds 3 layers.
  const auto uniform = with("dp=1", "uniform", 3)[0];
  CHECK(uniform.activations == doctest::Approx(3 * input + ends));
  CHECK(uniform.temporary == doctest::Approx(6 * s * b * V + 3 * layer));
  // Per pipeline chunk: with PP 2 (4 layers a stage, 2 micro-batches in flight on stage 0) block
  // 1 recomputes one layer of each stage.
  const auto staged = with("dp=1,pp=2", "block", 1);
  const double embed = totals(embedding_ops(m, shape, {})).saved_bytes;
  CHECK(staged[0].activations == doctest::Approx(2 * (input + 3 * layer + embed)));
  // A method needs full recompute of every layer; the count is bounded.
  ParallelConfig sel;
  sel.recompute = Recompute::selective;
  CHECK_THROWS_WITH_AS(set_recompute_method(sel, "block", 2, "x"),
                       "x: a recompute method needs full recompute of every layer", Error);
  ParallelConfig full;
  full.recompute = Recompute::full;
  CHECK_THROWS_WITH_AS(set_recompute_method(full, "block", 0, "x"),
                       "x: --recompute-num-layers must be from 1 to 65536", Error);
  CHECK_THROWS_WITH_AS(set_recompute_method(full, "chunked", 2, "x"),
                       "x: --recompute-method 'chunked': expected uniform or block", Error);
}

TEST_CASE("ZeRO-3's gathered weights: 16-bit whatever the shards hold; FP8 float8 all-gather") {
  // torchtitan keeps fp32 shards (4 B a parameter) and gathers bf16 (FSDP2's param_dtype): the
  // current and the prefetched layer at 2 B a parameter, plus the layer's unsharded gradients in
  // the stack's 4-byte grad state. An FP8 run gathers the same 16-bit weights, and torchao keeps
  // no FP8 copy: its weight state is the bf16 run's.
  const auto m = bundled("llama3.1-8b");
  const double layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096;
  const auto with_stack = [&](const char* stack, std::int32_t zero, DType dtype) {
    ParallelConfig c;
    c.mesh = parse_mesh("dp=8", "--mesh");
    c.zero = zero;
    MemoryOptions o;
    o.recipe = stack_recipe(*bundled_stack(stack), dtype);
    return worst_stage(
        training_memory_per_stage(m, TrainingMemoryJob{4096, 8, 1, dtype, {}}, c, o));
  };
  const auto z3 = with_stack("torchtitan", 3, DType::bf16);
  const auto z2 = with_stack("torchtitan", 2, DType::bf16);
  CHECK(z3.temporary - z2.temporary == doctest::Approx(2 * layer * 2 + layer * 4));
  const auto f8 = with_stack("torchtitan", 3, DType::fp8);
  CHECK(f8.weights == doctest::Approx(z3.weights));
  CHECK(f8.temporary - with_stack("torchtitan", 2, DType::fp8).temporary ==
        doctest::Approx(2 * layer * 2 + layer * 4));
  // Transformer Engine keeps a 1-byte FP8 copy of each weight an FP8 GEMM reads, sharded with
  // the rest: the 32 layers' linears (7 GEMMs' weights, 218.1 M a layer less 8,192 of norms),
  // not the embedding, the 16-bit output layer or the norms (2 × 525.3 M + 65 × 4,096 kept
  // without one).
  const double linears = layer - 2 * 4096;
  const auto te = with_stack("megatron", 3, DType::fp8);
  CHECK(te.weights - with_stack("megatron", 3, DType::bf16).weights ==
        doctest::Approx(32 * linears / 8));
  // torchao's float8 all-gather: the linears' weights gather in one byte, the two norms' in
  // two: both gathered layers shrink by a byte a linear parameter; a bf16 run is unchanged.
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8", "--mesh");
  c.zero = 3;
  const auto run = [&](const Stack& st, DType dtype, bool reshard) {
    c.reshard_after_forward = reshard;
    MemoryOptions o;
    o.recipe = stack_recipe(st, dtype);
    return worst_stage(
        training_memory_per_stage(m, TrainingMemoryJob{4096, 8, 1, dtype, {}}, c, o));
  };
  const auto& plain = *bundled_stack("torchtitan");
  for (const auto gather : {Fp8FsdpAllGather::dynamic, Fp8FsdpAllGather::precomputed}) {
    const auto st = with_fp8_fsdp_all_gather(plain, gather);
    CHECK(f8.temporary - run(st, DType::fp8, true).temporary == doctest::Approx(2 * linears));
    CHECK(run(st, DType::fp8, true).weights == doctest::Approx(f8.weights));
    CHECK(run(st, DType::bf16, true).temporary == doctest::Approx(z3.temporary));
    // Without resharding every layer's gathered weights stay (but the local shard): 32 layers'
    // linears a byte less, the embedding and head still 16-bit.
    CHECK(run(plain, DType::fp8, false).temporary - run(st, DType::fp8, false).temporary ==
          doctest::Approx(32 * linears * 7 / 8));
  }
  // Without a shard group FSDP gathers nothing, and the switch changes nothing.
  c.mesh = parse_mesh("tp=8", "--mesh");
  const auto on = with_fp8_fsdp_all_gather(plain, Fp8FsdpAllGather::dynamic);
  CHECK(run(on, DType::fp8, true).temporary ==
        doctest::Approx(run(plain, DType::fp8, true).temporary));
  // Megatron's FP8 parameters (--fp8-param-gather): the linears' working weights are one byte
  // instead of TE's bf16 weight and its FP8 copy (3 B); under ZeRO-1 every rank holds them all.
  const auto& mg = *bundled_stack("megatron");
  const auto fp8_params = with_fp8_params(mg);
  c.mesh = parse_mesh("dp=8", "--mesh");
  c.zero = 1;
  CHECK(run(mg, DType::fp8, true).weights - run(fp8_params, DType::fp8, true).weights ==
        doctest::Approx(32 * linears * 2));
  CHECK(run(fp8_params, DType::bf16, true).weights ==
        doctest::Approx(run(mg, DType::bf16, true).weights));
  // ZeRO-3 shards them over 8, and the two gathered layers take a byte a linear parameter less.
  c.zero = 3;
  const auto sixteen = run(mg, DType::fp8, true), eight = run(fp8_params, DType::fp8, true);
  CHECK(sixteen.weights - eight.weights == doctest::Approx(32 * linears * 2 / 8));
  CHECK(sixteen.temporary - eight.temporary == doctest::Approx(2 * linears));
}

TEST_CASE("Transformer Engine's FP8 copies: the linears' and the experts', not the router's") {
  // Mixtral 8x7B at dp=8, ep=8, ZeRO-1 (copies unsharded): a layer's attention linears
  // 2 × 4096² + 2 × 4096 × 1024 = 41,943,040 and its rank's one expert 3 × 4096 × 14336 =
  // 176,160,768 take a byte more each; the router (a 16-bit torch linear), the norms, the
  // embedding and the output layer none.
  const auto m = bundled("mixtral-8x7b");
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8,ep=8", "--mesh");
  c.zero = 1;
  const auto weights = [&](DType dtype) {
    MemoryOptions o;
    o.recipe = stack_recipe(*bundled_stack("megatron"), dtype);
    return worst_stage(training_memory_per_stage(m, TrainingMemoryJob{4096, 8, 1, dtype, {}}, c, o))
        .weights;
  };
  CHECK(weights(DType::fp8) - weights(DType::bf16) ==
        doctest::Approx(32 * (41943040.0 + 176160768.0)));
}

TEST_CASE("ZeRO-3 gathers layers; expert state shards over the expert data-parallel group") {
  const auto m = bundled("llama3.1-8b");
  const auto z3 = train(m, "dp=8", 3);
  const auto z2 = train(m, "dp=8", 2);
  // One layer's weights gathered twice (current + prefetch) plus its unsharded gradients.
  const double layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096;
  CHECK(z3.temporary - z2.temporary == doctest::Approx(2 * layer * 2 + layer * 2));
  CHECK(z3.weights == doctest::Approx(z2.weights / 8));
  // Mixtral with ep = dp = 8: every expert has one owner, so ZeRO cannot shard its state.
  const auto mix = bundled("mixtral-8x7b");
  const auto e8 = train(mix, "dp=8,ep=8", 1);
  const auto e1 = train(mix, "dp=8", 1);
  CHECK(e8.weights < e1.weights);
  const double expert_params = 32.0 * 3 * 4096 * 14336;  // one local expert per layer
  CHECK(e8.optimizer ==
        doctest::Approx(expert_params * 12 + (46.7e9 - 8 * expert_params) * 12 / 8).epsilon(0.002));
}

TEST_CASE("memory errors") {
  const auto m = bundled("llama3.1-8b");
  CHECK_THROWS_AS(train(m, "pp=33", 0), Error);
}

TEST_CASE("memory categories: DESIGN.md's keys in order, each field once, summing to the total") {
  MemoryBreakdown b;
  b.weights = 1;
  b.gradients = 2;
  b.optimizer = 4;
  b.activations = 8;
  b.temporary = 16;
  b.communication = 32;
  b.allocator = 64;
  b.kv_cache = 128;
  const auto cats = memory_categories(b);
  const char* names[] = {"weights",   "gradients",     "optimizer", "activations",
                         "temporary", "communication", "allocator", "kv_cache"};
  double sum = 0, expected = 1;
  for (std::size_t i = 0; i < cats.size(); ++i) {
    CHECK(std::string(cats[i].name) == names[i]);
    CHECK(cats[i].bytes == expected);  // powers of two: a field listed twice or swapped shows
    expected *= 2;
    sum += cats[i].bytes;
  }
  CHECK(sum == b.total());
}
