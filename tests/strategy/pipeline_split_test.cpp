#include "strategy/pipeline_split.hpp"

#include <doctest/doctest.h>

#include "model/model_loader.hpp"
#include "model/param_count.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {

ModelSpec split_test_llama8b() {
  return load_model(source_path("workloads/models/llama3.1-8b.json"));
}

ParallelConfig split_test_layout(std::int64_t pp, std::int64_t v) {
  ParallelConfig c;
  c.mesh = parse_mesh("pp=" + std::to_string(pp), "--mesh");
  if (v > 1) c.schedule = {ScheduleKind::interleaved, v};
  return c;
}

}  // namespace

TEST_CASE("model_chunks: pp × the virtual stages of an interleaved schedule") {
  CHECK(model_chunks(split_test_layout(4, 1)) == 4);
  CHECK(model_chunks(split_test_layout(4, 3)) == 12);
}

TEST_CASE("framework_chunk_layers: each bundled stack's framework split of Llama 3.1 8B") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();
  // Megatron: 32 layers evenly on 4 stages, and on 4 × 2 interleaved chunks.
  const auto& mg = bundled_stack("megatron")->pipeline_split;
  CHECK(framework_chunk_layers(mg, m, 4) == V{8, 8, 8, 8});
  CHECK(framework_chunk_layers(mg, m, 8) == V(8, 4));
  // torchtitan: 34 units on 4 stages → 9, 9, 8, 8 units; less the embedding and the output.
  CHECK(framework_chunk_layers(bundled_stack("torchtitan")->pipeline_split, m, 4) == V{8, 9, 8, 7});
  // DeepSpeed by parameters: a layer 218,112,000 (attention 41,943,040, MLP 176,160,768, norms
  // 8,192), the embedding 525,336,576, the head 525,340,672 with the final norm. [7, 9, 9, 7]
  // holds the largest stage to 525.3 M + 7 × 218.1 M = 2,052.1 M; under that an end holds at
  // most 6 layers and a middle stage 9: 30 < 32 layers. The greedy fill takes 7, 9, 9, 7.
  CHECK(layer_params(m, 0) == doctest::Approx(218112000.0));
  CHECK(count_params(m).embedding == doctest::Approx(525336576.0));
  CHECK(framework_chunk_layers(bundled_stack("deepspeed")->pipeline_split, m, 4) == V{7, 9, 9, 7});
  // The ideal stack balances by time in the trace builder: nothing here. More chunks than
  // layers: nothing either (the mesh checks refuse it).
  CHECK(framework_chunk_layers(bundled_stack("ideal")->pipeline_split, m, 4).empty());
  CHECK(framework_chunk_layers(mg, m, 33).empty());
}

TEST_CASE("framework_split_note: only where the framework would not run the split as priced") {
  const auto m = split_test_llama8b();
  const auto& mg = *bundled_stack("megatron");
  const auto& tt = *bundled_stack("torchtitan");
  CHECK(framework_split_note(mg, m, 4).empty());
  CHECK(framework_split_note(mg, m, 1).empty());
  // 32 layers on 5 stages: Megatron needs the ends given (32, 33 and 34 units do not divide):
  // the middle stages ceil(32 / 5) = 7, the ends the 11 left, 6 and 5. torchtitan's rule splits
  // any count its own way.
  CHECK(framework_chunk_layers(mg.pipeline_split, m, 5) ==
        std::vector<std::int64_t>{6, 7, 7, 7, 5});
  CHECK(framework_split_note(mg, m, 5) ==
        "stack 'megatron' splits the layers evenly, and 32 do not divide into 5 pipeline stages, "
        "as they are or with the ends weighed: the first and last stage take 6 and 5, the others "
        "7 (Megatron-LM's --decoder-first/last-pipeline-num-layers)");
  // Interleaved (5 stages × 2 chunks) Megatron spreads each stage's layers over its chunks, which
  // 32 layers cannot give here: the first 2 of 10 chunks one more, and a note.
  CHECK(framework_chunk_layers(mg.pipeline_split, m, 10, 2) ==
        std::vector<std::int64_t>{4, 4, 3, 3, 3, 3, 3, 3, 3, 3});
  CHECK(framework_split_note(mg, m, 10, 2) ==
        "stack 'megatron' splits the layers evenly, and 32 do not divide into 10 pipeline "
        "chunks: its framework needs them to or the split given (--stage-layers; Megatron-LM's "
        "--decoder-first/last-pipeline-num-layers); simulated with the first 2 one layer more");
  CHECK(framework_split_note(tt, m, 5).empty());
  // 32 chunks with the ends weighed: 34 units, 1 a chunk and the first 2 one more: the last
  // would keep none.
  CHECK(framework_split_note(tt, m, 32) ==
        "stack 'torchtitan' splits 32 layers (the embedding counted as 1 and the loss as 1) into "
        "32 pipeline chunks; that leaves an end chunk no layer, so the layers were split evenly");
  CHECK(framework_chunk_layers(tt.pipeline_split, m, 32) == std::vector<std::int64_t>(32, 1));
}

TEST_CASE("framework_split_note: Megatron's 405B split weighs the ends, and says so") {
  const auto m = load_model(source_path("workloads/models/llama3.1-405b.json"));
  const auto& mg = *bundled_stack("megatron");
  std::vector<std::int64_t> meta(16, 8);
  meta.front() = meta.back() = 7;  // Llama 3 (2407.21783 §3.3.2)
  CHECK(framework_chunk_layers(mg.pipeline_split, m, 16) == meta);
  CHECK(framework_split_note(mg, m, 16) ==
        "stack 'megatron' splits the layers evenly, and 126 divide into 16 pipeline chunks only "
        "with the embedding and the loss each counted as a layer (Megatron-LM's "
        "--account-for-embedding/loss-in-pipeline-split): 8 units a chunk");
}
