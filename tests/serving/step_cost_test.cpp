#include <doctest/doctest.h>

#include <cmath>

#include "memory/memory_model.hpp"
#include "model/op_catalogue.hpp"
#include "model/param_count.hpp"
#include "network/collective_runner.hpp"
#include "serving_fixture.hpp"

namespace meshsim::test {

TEST_CASE("serving step: batch-1 decode is the weights and KV read at HBM bandwidth") {
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  const double step = f.cost->stage_seconds(0, one_decode(1024));
  const auto params = count_params(f.model);
  // 16-bit weights of every GEMM (the embedding table is a lookup, not read whole) and the KV
  // cache of 1024 tokens.
  const double weight_bytes = 2.0 * (params.total - params.embedding);
  const double kv_bytes = 1024 * kv_bytes_per_token(f.model, DType::bf16);
  const double ideal = (weight_bytes + kv_bytes) / f.topo.gpu.hbm_Bps;
  MESSAGE("8B batch-1 decode step ", step * 1e3, " ms; bytes / peak HBM bandwidth ", ideal * 1e3,
          " ms");
  CHECK(step >= ideal);
  // Above it: the measured per-kernel costs of about a dozen kernels a layer (bundled H100 fit;
  // the decode-attention kernel's 19 µs was measured on A100 FlashInfer) — 2.4 ms on 4.5 ms of
  // bytes. vLLM serves Llama 3.1 8B at batch 1 on H100 at about 150 tokens/s (6.7 ms).
  CHECK(step <= 1.6 * ideal);
}

}  // namespace meshsim::test

namespace meshsim::test {

TEST_CASE("serving step: prefill is compute-bound at the GEMM FLOPs") {
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  const std::int64_t T = 4096;
  const double step = f.cost->stage_seconds(0, one_prefill(T));
  const auto params = count_params(f.model);
  const double gemm_flops = 2.0 * (params.total - params.embedding) * T;
  const double floor_s = gemm_flops / f.compute.peak_flops(DType::bf16);
  MESSAGE("8B prefill of 4096 tokens: ", step * 1e3, " ms; GEMM FLOPs at peak ", floor_s * 1e3);
  CHECK(step > floor_s);
  CHECK(step < 2.0 * floor_s);
  // A chunk after a cached prefix attends to more keys than the same chunk alone.
  BatchShape later;
  later.prefill.push_back(PrefillChunk{.tokens = 512, .context = 3584});
  CHECK(f.cost->attention_seconds(later) > f.cost->attention_seconds(one_prefill(512)));
}

TEST_CASE("serving step: TP adds two all-reduces of the layer output per layer") {
  ReplicaFixture f("dgx-h100.json", "llama3.1-70b.json", ReplicaShape{.tp = 8});
  const double ar = f.cost->tp_allreduce_seconds(0, 4096);
  CollectiveCall call;
  call.op = CollectiveOp::all_reduce;
  call.ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  call.bytes = 4096.0 * 8192 * 2;  // tokens × hidden × 2 bytes
  CHECK(ar == doctest::Approx(
                  price_collective(f.topo, f.comm.router, call, std::nullopt).time.seconds()));
  const auto b = one_decode(2048);
  const double composed = 80 * (f.cost->layer_dense_seconds(0, 1) + f.cost->attention_seconds(b) +
                                2 * f.cost->tp_allreduce_seconds(0, 1));
  const double step = f.cost->stage_seconds(0, b);
  CHECK(step > composed);  // plus the embedding lookup and the logits
  CHECK(step < composed * 1.05);
  ReplicaFixture one("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  CHECK(one.cost->tp_allreduce_seconds(0, 4096) == 0);
}

TEST_CASE("serving step: pipeline stages add up to the unsplit model") {
  ReplicaFixture whole("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  ReplicaFixture split("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{.pp = 2});
  CHECK(split.cost->stage_layers() == std::vector<std::int64_t>{16, 16});
  for (const auto& b : {one_decode(1000), one_prefill(2048)}) {
    const double sum = split.cost->stage_seconds(0, b) + split.cost->stage_seconds(1, b);
    CHECK(sum == doctest::Approx(whole.cost->stage_seconds(0, b)).epsilon(1e-9));
  }
  // The hidden states of 2048 tokens (8 MiB) cross NVLink between the stages.
  const double send = split.cost->send_seconds(0, 2048);
  CHECK(send > 2048.0 * 4096 * 2 / 900e9);
  CHECK(split.cost->send_seconds(1, 2048) == 0);  // the last stage sends nothing
}

TEST_CASE("serving step: fp8 weights and KV halve the bytes a decode reads") {
  ReplicaFixture bf("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  ReplicaFixture f8("dgx-h100.json", "llama3.1-8b.json",
                    ReplicaShape{.weight_dtype = DType::fp8, .kv_dtype = DType::fp8});
  const auto b = one_decode(4096);
  const double ratio = f8.cost->stage_seconds(0, b) / bf.cost->stage_seconds(0, b);
  MESSAGE("fp8 / bf16 decode step: ", ratio);
  CHECK(ratio > 0.5);  // the per-kernel costs do not halve
  CHECK(ratio < 0.75);
  CHECK(f8.cost->attention_seconds(b) < bf.cost->attention_seconds(b));
}

TEST_CASE("serving step: MoE decode reads only the experts its tokens activate") {
  ReplicaFixture f("dgx-h100.json", "mixtral-8x7b.json", ReplicaShape{.tp = 2});
  const double decode = f.cost->stage_seconds(0, one_decode(512));
  const double prefill = f.cost->stage_seconds(0, one_prefill(4096));
  CHECK(std::isfinite(decode));
  CHECK(decode > 0);
  CHECK(prefill > decode);
  // One token picks 2 of 8 experts, one per rank on average (4 local experts each): a decode
  // step reads at least one expert's 16-bit weights per layer, and well under all four local
  // experts' (which the step read before: 45 B routed parameters over 2 ranks).
  const auto params = count_params(f.model);
  const double one_expert_bytes = params.routed_experts / 8 * 2;
  CHECK(decode > one_expert_bytes / f.topo.gpu.hbm_Bps);
  CHECK(decode < 4 * one_expert_bytes / f.topo.gpu.hbm_Bps);
}

}  // namespace meshsim::test

namespace meshsim::test {

TEST_CASE(
    "serving step: the model's ends — embedding all-reduce under TP, logits gather, sampling") {
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{.tp = 2, .pp = 2});
  auto batch = one_decode(1024);
  const double first = f.cost->ends_seconds(0, batch), last = f.cost->ends_seconds(1, batch);
  // Stage 0: the lookup (read and write one 4096-wide 16-bit row) plus one TP all-reduce of it.
  const auto& cm = f.cost->compute();
  const double lookup = cm.seconds(memory_kernel(MemoryClass::gather, 2.0 * 2 * 4096));
  CHECK(first == doctest::Approx(lookup + f.cost->tp_allreduce_seconds(0, 1)));
  // Stage 1: final norm, logits of 128256/2 columns, their gather and a softmax over the whole
  // vocabulary: more with the gather and sampling than norm + logits alone.
  const double norm = cm.seconds(memory_kernel(MemoryClass::norm, 2.0 * 2 * 4096));
  const double logits =
      cm.seconds(gemm_kernel({.m = 1, .n = 128256 / 2, .k = 4096, .batch = 1}, DType::bf16));
  const double sampling = cm.seconds(memory_kernel(MemoryClass::softmax, 6.0 * 128256));
  CHECK(last > norm + logits + sampling);
  CHECK(last < norm + logits + sampling + 1e-3);  // the 256 KB gather is microseconds
  // Stage sums: layers + ends.
  CHECK(f.cost->ends_seconds(1, BatchShape{}) == 0);
  batch.sampled = 0;
  CHECK(f.cost->ends_seconds(1, batch) == 0);
}

}  // namespace meshsim::test

namespace meshsim::test {

TEST_CASE("serving step: a measured kernel gap is paid per kernel, the graph's in a CUDA graph") {
  // 70B on TP 8, a profile that measured 2 µs between kernels launched one by one and 0.5 µs in
  // a CUDA graph. A layer launches its 10 non-attention ops (norms, GEMMs, RoPE, SiLU·mul,
  // residual adds), its attention kernels (one per prefill chunk or one for all decodes, and the
  // KV append) and TP's two all-reduces; the ends the embedding lookup and its all-reduce, and
  // the final norm, logits, their gather and the sampling softmax: 6.
  ReplicaFixture plain("dgx-h100.json", "llama3.1-70b.json", ReplicaShape{.tp = 8});
  CalibrationProfile measured;
  measured.gpu = plain.topo.gpu.model;
  measured.source = "test";
  measured.kernel_gap_s = 2e-6;
  measured.graph_kernel_gap_s = 0.5e-6;
  const ComputeModel gapped_compute(plain.topo.gpu, measured);
  StepCost gapped(plain.topo, plain.model, ReplicaShape{.tp = 8}, {0, 1, 2, 3, 4, 5, 6, 7},
                  gapped_compute, plain.comm);
  std::int64_t dense = 0;
  for (const auto& op : layer_ops(plain.model, 0, LayerShape{.micro_batch = 1, .seq = 1},
                                  Sharding{.tp = 8, .sp = false, .cp = 1, .ep = 1}))
    dense += op.forward.kind != KernelKind::attention && !op.forward.empty() ? 1 : 0;
  REQUIRE(dense == 10);
  const double kernels = 80.0 * (10 + 2 + 2) + 6;
  // Eager (no graph sizes set): a decode pays 2 µs a kernel.
  const auto decode = one_decode(1024);
  CHECK(gapped.stage_seconds(0, decode) - plain.cost->stage_seconds(0, decode) ==
        doctest::Approx(kernels * 2e-6).epsilon(1e-9).scale(0));
  // Captured as a CUDA graph: 0.5 µs; a prefill still runs eagerly.
  gapped.set_cuda_graph_sizes({1, 2, 4, 8});
  plain.cost->set_cuda_graph_sizes({1, 2, 4, 8});
  CHECK(gapped.stage_seconds(0, decode) - plain.cost->stage_seconds(0, decode) ==
        doctest::Approx(kernels * 0.5e-6).epsilon(1e-9).scale(0));
  const auto prefill = one_prefill(512);
  CHECK(gapped.stage_seconds(0, prefill) - plain.cost->stage_seconds(0, prefill) ==
        doctest::Approx(kernels * 2e-6).epsilon(1e-9).scale(0));
  CHECK(gapped.kernel_gap_s(decode) == 0.5e-6);
  CHECK(plain.cost->kernel_gap_s(decode) == 0.0);  // bundled profile: nothing measured
}

}  // namespace meshsim::test

namespace meshsim::test {

TEST_CASE("serving step: an eager step waits for the host's launches when they outlast the GPU") {
  // 70B on TP 8, one decode of 1,024 tokens of context: 80 · 14 + 6 = 1,126 kernels (as above).
  // At 100 µs of host time a launch the host takes 112.6 ms, far beyond the GPU's step; at 1 µs
  // (1.1 ms) the GPU is slower and the step is unchanged. A captured CUDA graph is one launch.
  ReplicaFixture plain("dgx-h100.json", "llama3.1-70b.json", ReplicaShape{.tp = 8});
  const auto decode = one_decode(1024);
  const double gpu = plain.cost->stage_seconds(0, decode);
  const auto with_host = [&](double host_s) {
    CalibrationProfile measured;
    measured.gpu = plain.topo.gpu.model;
    measured.source = "test";
    measured.host_per_kernel_s = host_s;
    return ComputeModel(plain.topo.gpu, measured);
  };
  const ComputeModel slow_host = with_host(100e-6), fast_host = with_host(1e-6);
  StepCost slow(plain.topo, plain.model, ReplicaShape{.tp = 8}, {0, 1, 2, 3, 4, 5, 6, 7}, slow_host,
                plain.comm);
  StepCost fast(plain.topo, plain.model, ReplicaShape{.tp = 8}, {0, 1, 2, 3, 4, 5, 6, 7}, fast_host,
                plain.comm);
  REQUIRE(gpu > 1.126e-3);
  REQUIRE(gpu < 0.1126);
  CHECK(slow.stage_seconds(0, decode) == doctest::Approx(1126 * 100e-6).epsilon(1e-12));
  CHECK(fast.stage_seconds(0, decode) == gpu);
  slow.set_cuda_graph_sizes({1, 2, 4, 8});
  plain.cost->set_cuda_graph_sizes({1, 2, 4, 8});
  CHECK(slow.stage_seconds(0, decode) == plain.cost->stage_seconds(0, decode));
}

}  // namespace meshsim::test
