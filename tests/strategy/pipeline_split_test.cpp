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
  // DeepSeek-V3 by parameters, each layer its own: a dense layer 0.583 B, an MoE layer 11.507 B
  // (every expert on the rank, no expert parallelism), the embedding and the head 0.927 B each. 58
  // MoE layers on 8 stages put 8 on one, so no stage can be held below 8 × 11.507 = 92.06 B; under
  // it the first stage takes the embedding, the 3 dense layers and 7 MoE (89.2 B), six stages 8,
  // and the last the 3 left (35.4 B): the greedy fill at the least bound, as DeepSpeed's
  // partition_balanced. Every layer priced as an MoE one gave 7, 8, 8, 8, 8, 8, 8, 6.
  {
    const auto v3 = load_model(source_path("workloads/models/deepseek-v3.json"));
    const auto p = count_params(v3);
    CHECK(layer_params(v3, 2) == doctest::Approx(0.583483e9).epsilon(1e-5));
    CHECK(layer_params(v3, 3) == doctest::Approx(11.5073e9).epsilon(1e-5));
    CHECK(p.embedding == doctest::Approx(0.926679e9).epsilon(1e-5));
    CHECK(framework_chunk_layers(bundled_stack("deepspeed")->pipeline_split, v3, 8) ==
          V{10, 8, 8, 8, 8, 8, 8, 3});
    // With expert parallelism 32 a rank builds 8 of an MoE layer's 256 routed experts (11.274 B
    // of its parameters, 0.352 B on the rank): 0.585 B, as light as a dense layer. The least
    // bound is then the first stage's embedding, 3 dense and 4 MoE layers (5.018 B): a first
    // stage of 6 leaves the last 7 (5.024 B), a middle stage of 9 is 5.268 B.
    CHECK(layer_params_on_rank(v3, 3, 32) == doctest::Approx(0.585318e9).epsilon(1e-5));
    CHECK(layer_params_on_rank(v3, 2, 32) == layer_params(v3, 2));
    CHECK(framework_chunk_layers(bundled_stack("deepspeed")->pipeline_split, v3, 8, 1, 32) ==
          V{7, 8, 8, 8, 8, 8, 8, 6});
  }
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
  // Interleaved (5 stages × 2 chunks) Megatron spreads each stage's layers over its chunks: the
  // same rule in pairs of layers, 16 pairs on 5 stages, the middle ceil(16 / 5) = 4 pairs, the
  // ends the 4 left, 2 and 2: stages of 4, 8, 8, 8, 4 layers, chunks half of them.
  CHECK(framework_chunk_layers(mg.pipeline_split, m, 10, 2) ==
        std::vector<std::int64_t>{2, 4, 4, 4, 2, 2, 4, 4, 4, 2});
  CHECK(framework_split_note(mg, m, 10, 2) ==
        "stack 'megatron' splits the layers evenly, and 32 do not divide into 10 pipeline chunks, "
        "as they are or with the ends weighed: the first and last stage take 4 and 4, the others "
        "8, each stage's layers spread evenly over its virtual stages (Megatron-LM's "
        "--decoder-first/last-pipeline-num-layers)");
  // 5 stages × 3: 32 layers are no multiple of 3, so no stage split spreads evenly: the first 2
  // of 15 chunks one more, and a note.
  CHECK(framework_chunk_layers(mg.pipeline_split, m, 15, 3) ==
        std::vector<std::int64_t>{3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2});
  CHECK(framework_split_note(mg, m, 15, 3) ==
        "stack 'megatron' splits the layers evenly, and 32 do not divide into 15 pipeline "
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

TEST_CASE("uneven_ends_chunks: Megatron's uneven split in units of the virtual stages") {
  using V = std::vector<std::int64_t>;
  // 80 layers (Llama 3.1 70B) on 6 stages × 2: 40 pairs, the middle ceil(40 / 6) = 7 pairs, the
  // ends the 12 left, 6 and 6: stages of 12, 14 × 4, 12 layers.
  CHECK(uneven_ends_chunks(80, 12, 2) == V{6, 7, 7, 7, 7, 6, 6, 7, 7, 7, 7, 6});
  CHECK(uneven_ends_chunks(61, 8, 1) == V{7, 8, 8, 8, 8, 8, 8, 6});  // DeepSeek-V3
  CHECK(uneven_ends_chunks(61, 16, 2).empty());                      // 61 is odd
  CHECK(uneven_ends_chunks(32, 8, 2).empty());                       // even already
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

TEST_CASE("end_switch_splits: the splits each bundled stack's end switches give, its own first") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();
  const auto& mg = bundled_stack("megatron")->pipeline_split;
  const auto& tt = bundled_stack("torchtitan")->pipeline_split;
  CHECK(mg.end_switches == EndSwitches::layers);
  CHECK(tt.end_switches == EndSwitches::weights);
  // Megatron, 32 layers on 2 stages: its own 16, 16; the account flags where the units divide
  // (none weighed: 32; both: 34 → 17 − 1 each, 16, 16 again); and the first stage 1 … 31 layers.
  const auto two = end_switch_splits(mg, m, 2);
  REQUIRE(two.size() == 1 + 2 + 31);
  CHECK(two[0] == V{16, 16});
  CHECK(two[1] == V{16, 16});
  CHECK(two[2] == V{16, 16});
  CHECK(two[3] == V{1, 31});
  CHECK(two.back() == V{31, 1});
  // On 4 stages the middle two hold `mid` each and the ends the rest, 2 … 30 layers between them:
  // Σ over mid = 1 … 15 of (31 − 2 mid) = 225 first/last pairs, plus its own and the unweighed
  // account split (33 and 34 units do not divide by 4).
  const auto four = end_switch_splits(mg, m, 4);
  CHECK(four.size() == 1 + 1 + 225);
  CHECK(std::find(four.begin(), four.end(), V{9, 8, 8, 7}) != four.end());
  // Interleaved (4 stages × 2): the unweighed account split, and each stage's layers a multiple
  // of its 2 virtual stages: mid = 2 … 14, the ends 28 … 4, the first 2 … ends − 2 in steps of 2,
  // 13 + 11 + … + 1 = 49 splits; a chunk is half its stage's layers.
  const auto interleaved = end_switch_splits(mg, m, 8, 2);
  REQUIRE(interleaved.size() == 1 + 1 + 49);
  CHECK(interleaved[1] == V(8, 4));
  CHECK(interleaved[2] == V{1, 1, 1, 13, 1, 1, 1, 13});  // stages 2, 2, 2, 26
  CHECK(std::find(interleaved.begin(), interleaved.end(), V{3, 5, 5, 3, 3, 5, 5, 3}) !=
        interleaved.end());
  // torchtitan: each end weighed 0 … 8 layers, after its own (1, 1).
  const auto weights = end_switch_splits(tt, m, 4);
  REQUIRE(weights.size() == 1 + 9 * 9);
  CHECK(weights[0] == V{8, 9, 8, 7});
  CHECK(weights[1] == V{8, 8, 8, 8});          // 0, 0
  CHECK(weights[1 + 9 + 2] == V{8, 9, 9, 6});  // 1, 2: 36 units, 9 each, less 1 and 2
  // No switches: DeepSpeed's own only; the ideal stack balances by time (nothing here).
  CHECK(end_switch_splits(bundled_stack("deepspeed")->pipeline_split, m, 4) ==
        std::vector<V>{V{7, 9, 9, 7}});
  CHECK(end_switch_splits(bundled_stack("ideal")->pipeline_split, m, 4).empty());
}

TEST_CASE("tuned_chunk_layers: the switches' split whose busiest stage is least, by hand") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();
  const auto& mg = bundled_stack("megatron")->pipeline_split;
  const auto& tt = bundled_stack("torchtitan")->pipeline_split;
  // Megatron on 2 stages, a layer 1 s, the embedding 0.2 s, head and loss 1.5 s: a + b = 32,
  // busiest max(a + 0.2, b + 1.5): 17, 15 → 17.2 (16, 16 → 17.5; 18, 14 → 18.2).
  CHECK(tuned_chunk_layers(mg, m, 2, 1, 1.0, 0.2, 1.5) == V{17, 15});
  // Nothing on the ends: every even split ties with the stack's own, which is kept.
  CHECK(tuned_chunk_layers(mg, m, 2, 1, 1.0, 0.0, 0.0) == V{16, 16});
  // torchtitan on 4 stages, the embedding 0.5 s, the head 2.5 s: a stage below 9 s would need
  // a ≤ 8, the middle ≤ 8, the last ≤ 6, 30 layers in all; 9 s is least. Its own 8, 9, 8, 7 is
  // 9.5 s (the last), every weighting with an unweighed embedding too (the first gets 9); the
  // first at 9 s in the order is the embedding 1, the loss 2: 8, 9, 9, 6.
  CHECK(tuned_chunk_layers(tt, m, 4, 1, 1.0, 0.5, 2.5) == V{8, 9, 9, 6});
  // Interleaved, chunk c on stage c mod pp, the stages' layers multiples of 2: a, mid, mid, b
  // with a + 2 mid + b = 32; below 10 s would need mid ≤ 8, a ≤ 8, b ≤ 6 (30 layers). 10 s
  // first at mid = 10, a = 6, b = 6 (6.5, 10, 10, 8.5); its own 8 × 4 is 10.5 s.
  CHECK(tuned_chunk_layers(mg, m, 8, 2, 1.0, 0.5, 2.5) == V{3, 5, 5, 3, 3, 5, 5, 3});
  CHECK(tuned_chunk_layers(bundled_stack("ideal")->pipeline_split, m, 4, 1, 1.0, 0.5, 2.5).empty());
  // With a check (memory, in a run): Megatron on 4 stages, a layer 1 s, the head 4 s: its own
  // 8 × 4 is 12 s; the least busy is 9, 9, 9, 5 (9 s). If the first stage may hold at most 8
  // layers: a = 8 and 2 mid + b = 24 reach 10 s at best, first at mid 9 (8, 9, 9, 6). The check
  // is asked only of splits less busy than the best so far.
  CHECK(tuned_chunk_layers(mg, m, 4, 1, 1.0, 0.0, 4.0) == V{9, 9, 9, 5});
  int asked = 0;
  const auto first_at_most_8 = [&](const V& v) {
    ++asked;
    return v.front() <= 8;
  };
  CHECK(tuned_chunk_layers(mg, m, 4, 1, 1.0, 0.0, 4.0, first_at_most_8) == V{8, 9, 9, 6});
  CHECK(asked > 0);
  CHECK(asked < 40);  // of the 227 splits
}

TEST_CASE(
    "tuned_chunk_layers: where the stack's own split does not fit, the least busy that does") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();
  const auto& mg = bundled_stack("megatron")->pipeline_split;
  // Megatron on 2 stages, a layer 1 s, the embedding 0.2 s, head and loss 1.5 s (17, 15 wins,
  // 17.2 s, above). If the first stage holds at most 15 layers, its own 16, 16 (17.5 s) does
  // not fit: of a ≤ 15, the busiest stage is the last, 32 − a + 1.5 s, least at a = 15 (18.5 s,
  // busier than the stack's own).
  const auto first_at_most_15 = [](const V& v) { return v.front() <= 15; };
  CHECK(tuned_chunk_layers(mg, m, 2, 1, 1.0, 0.2, 1.5, first_at_most_15) == V{15, 17});
  // Nothing fits: the stack's own stays.
  CHECK(tuned_chunk_layers(mg, m, 2, 1, 1.0, 0.2, 1.5, [](const V&) { return false; }) ==
        V{16, 16});
}

TEST_CASE("fitting_end_switch_split: layers moved off the stages over memory, by hand") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();  // 32 layers
  const auto& mg = bundled_stack("megatron")->pipeline_split;
  // A stage fits while its layers (its chunks' sum, chunk c on stage c mod pp) are at most its
  // cap; `asked` counts the calls.
  int asked = 0;
  const auto caps = [&](std::vector<std::int64_t> cap) {
    return [&asked, cap](const V& chunks) {
      ++asked;
      std::vector<std::int64_t> stage(cap.size(), 0);
      for (std::size_t c = 0; c < chunks.size(); ++c) stage[c % cap.size()] += chunks[c];
      std::vector<bool> fit;
      for (std::size_t s = 0; s < cap.size(); ++s) fit.push_back(stage[s] <= cap[s]);
      return fit;
    };
  };
  // 4 stages, the first holding at most 6 layers, the others 9: the middle stages take 9 each,
  // the first 6 of the 14 left, the last 8. A binary search on each: far fewer calls than the
  // family's 227 splits.
  CHECK(fitting_end_switch_split(mg, m, 4, 1, caps({6, 9, 9, 9})) == V{6, 9, 9, 8});
  CHECK(asked <= 12);
  // The last stage cannot take what the first leaves: 9 + 9 in the middle, 2 first, 12 last.
  CHECK(fitting_end_switch_split(mg, m, 4, 1, caps({2, 9, 9, 9})).empty());
  // The middle stages cannot hold a layer each.
  CHECK(fitting_end_switch_split(mg, m, 4, 1, caps({20, 0, 20, 20})).empty());
  // Two stages: the first takes the most it holds, 12; the last 20.
  CHECK(fitting_end_switch_split(mg, m, 2, 1, caps({12, 20})) == V{12, 20});
  CHECK(fitting_end_switch_split(mg, m, 2, 1, caps({12, 19})).empty());
  // Interleaved × 2, stage counts in multiples of 2: the middle stages 10 each (≤ 10), the first
  // 6 of the 12 left (≤ 7), the last 6; chunks are half their stage's.
  CHECK(fitting_end_switch_split(mg, m, 8, 2, caps({7, 10, 10, 10})) == V{3, 5, 5, 3, 3, 5, 5, 3});
  // torchtitan's weights: the first of its splits that fits (the embedding weighed 0, the loss
  // 2: 9, 9, 8, 6); a stack without switches has none.
  const auto& tt = bundled_stack("torchtitan")->pipeline_split;
  CHECK(fitting_end_switch_split(tt, m, 4, 1, caps({9, 9, 9, 6})) == V{9, 9, 8, 6});
  CHECK(fitting_end_switch_split(bundled_stack("ideal")->pipeline_split, m, 4, 1,
                                 caps({32, 32, 32, 32}))
            .empty());
}

TEST_CASE("tuned_chunk_layers and balanced_chunks weigh each layer by its own time") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();
  const auto& mg = bundled_stack("megatron")->pipeline_split;
  // Megatron on 2 stages, the first 4 layers 0.25 s (dense before MoE), the other 28 1 s, the
  // embedding 0.2 s, head and loss 1.5 s: a first stage of a layers is a − 3 + 0.2 s, the last
  // 32 − a + 1.5 s; a = 18 → 15.2 / 15.5 (17 → 16.5, 19 → 16.2). Equal layers gave 17, 15.
  std::vector<double> layer(32, 1.0);
  for (int l = 0; l < 4; ++l) layer[static_cast<std::size_t>(l)] = 0.25;
  CHECK(tuned_chunk_layers(mg, m, 2, 1, layer, 0.2, 1.5) == V{18, 14});
  // The uniform overload is the vector one with every layer alike.
  CHECK(tuned_chunk_layers(mg, m, 2, 1, std::vector<double>(32, 1.0), 0.2, 1.5) ==
        tuned_chunk_layers(mg, m, 2, 1, 1.0, 0.2, 1.5));
  // Costs 1, 1, 1, 1, 4, 4 in 3 chunks: 4, 1, 1 holds each to 4 (equal costs: 2, 2, 2). With
  // the first chunk 2 more: below 5 the first takes two layers, the second two (1 + 1; a third
  // would be 6), and the last two MoE layers would be 8; at 5: 3, 2, 1 (5, 5, 4).
  const std::vector<double> cost{1, 1, 1, 1, 4, 4};
  CHECK(balanced_chunks(cost, 3, 0.0, 0.0) == V{4, 1, 1});
  CHECK(balanced_chunks(cost, 3, 2.0, 0.0) == V{3, 2, 1});
  CHECK(balanced_chunks(std::vector<double>(6, 1.0), 3, 0.0, 0.0) == V{2, 2, 2});
  // An end heavier than any bound keeps its one layer; the others balance among themselves.
  CHECK(balanced_chunks(std::vector<double>(7, 1.0), 3, 100.0, 0.0) == V{1, 3, 3});
  CHECK(balanced_chunks(cost, 7, 0.0, 0.0) == split_layers(6, 7));
  CHECK(balanced_chunks(cost, 0, 0.0, 0.0).empty());
}

TEST_CASE("weights_giving and end_switch_note: the switches that say a split") {
  using V = std::vector<std::int64_t>;
  const auto m = split_test_llama8b();
  const auto& mg = *bundled_stack("megatron");
  const auto& tt = *bundled_stack("torchtitan");
  // torchtitan's 8, 9, 9, 6: the embedding weighed 1, the loss 2 (tuned_chunk_layers' case).
  const auto w = weights_giving(tt.pipeline_split, m, V{8, 9, 9, 6});
  REQUIRE(w);
  CHECK(w->embedding_layers == 1);
  CHECK(w->loss_layers == 2);
  // Megatron's own 16, 16 needs no flag; 17, 15 no account flag gives (its first/last-stage
  // switches do).
  const auto plain = weights_giving(mg.pipeline_split, m, V{16, 16});
  REQUIRE(plain);
  CHECK(plain->embedding_layers + plain->loss_layers == 0);
  CHECK_FALSE(weights_giving(mg.pipeline_split, m, V{17, 15}));
  CHECK(end_switch_note(tt, m, V{8, 9, 9, 6}, V{8, 9, 8, 7}) ==
        "layers split 8, 9, 9, 6 by the stack's end switches, the ends weighed 1 and 2 layers "
        "(torchtitan's pipeline_parallel_first/last_stage_less_layers), to balance the stages' "
        "estimated time; stack 'torchtitan' splits them 8, 9, 8, 7 without the switches");
  CHECK(end_switch_note(mg, m, V{17, 15}, V{16, 16})
            .find("--decoder-first-pipeline-num-layers 17 --decoder-last-pipeline-num-layers 15") !=
        std::string::npos);
  // Interleaved, a stage's layers are its chunks': stages 6, 10, 10, 6.
  CHECK(end_switch_note(mg, m, V{3, 5, 5, 3, 3, 5, 5, 3}, V(8, 4), 2)
            .find("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6") !=
        std::string::npos);
  // Chosen to fit memory, the note says so instead.
  const auto for_memory = end_switch_note(mg, m, V{15, 17}, V{16, 16}, 1, true);
  CHECK(for_memory.find("to fit memory (the least busy split that does; the stack's own leaves "
                        "a stage over it)") != std::string::npos);
  CHECK(for_memory.find("estimated time") == std::string::npos);
}
