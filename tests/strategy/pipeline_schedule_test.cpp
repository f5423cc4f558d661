#include "strategy/pipeline_schedule.hpp"

#include <doctest/doctest.h>

#include "core/error.hpp"
#include "strategy/trace_builder.hpp"

using namespace meshsim;

namespace {

// Every stage's order of a schedule.
std::vector<std::vector<PipelineAction>> orders(const Schedule& s, std::int64_t pp,
                                                std::int64_t m) {
  std::vector<std::vector<PipelineAction>> a;
  for (std::int64_t r = 0; r < pp; ++r) a.push_back(stage_actions(s, pp, r, m));
  return a;
}

}  // namespace

TEST_CASE("1F1B: warm-up forwards, steady one-forward-one-backward, cool-down backwards") {
  const Schedule s{ScheduleKind::one_f_one_b, 1};
  // Stage 0 of 4 with 6 micro-batches: 3 warm-up forwards.
  CHECK(to_string(stage_actions(s, 4, 0, 6)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  // The last stage alternates from the start.
  CHECK(to_string(stage_actions(s, 4, 3, 6)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages.
  CHECK(to_string(stage_actions(s, 4, 0, 2)) == "F0 F1 B0 B1");
}

TEST_CASE("pipeline steps: each schedule fills and drains before the next starts") {
  const Schedule s{ScheduleKind::one_f_one_b, 1};
  // 4 micro-batches as 2 schedules of 2 on stage 0 of 2: one warm-up forward each.
  CHECK(to_string(step_actions(s, 2, 0, 4, 2)) == "F0 F1 B0 B1 F2 F3 B2 B3");
  CHECK(to_string(step_actions(s, 2, 0, 4, 1)) == to_string(stage_actions(s, 2, 0, 4)));
  CHECK(to_string(stage_actions(s, 2, 0, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3");
  // Interleaved: each step is Megatron's order over its own micro-batches.
  CHECK(to_string(step_actions({ScheduleKind::interleaved, 2}, 2, 1, 4, 2)) ==
        "F0 F1 F0.1 B0.1 F1.1 B1.1 B0 B1 F2 F3 F2.1 B2.1 F3.1 B3.1 B2 B3");
  // The bound's playout at fixed times: with F = B = 1 on two stages of one chunk each, a step
  // of m micro-batches takes 2 (m + 1) on the 1F1B critical path; two steps of 2 take 2 × 6.
  const PassTimes t{{1, 1}, {1, 1}, {0, 0}};
  std::vector<std::vector<PipelineAction>> one, two;
  for (std::int64_t r = 0; r < 2; ++r) {
    one.push_back(stage_actions(s, 2, r, 4));
    two.push_back(step_actions(s, 2, r, 4, 2));
  }
  CHECK(play_schedule(one, 4, t)->end_s[0] == doctest::Approx(10));
  CHECK(play_schedule(two, 4, t)->end_s[0] == doctest::Approx(12));
}

TEST_CASE("GPipe, zero bubble and interleaved orders") {
  CHECK(to_string(stage_actions({ScheduleKind::gpipe, 1}, 2, 0, 3)) == "F0 F1 F2 B0 B1 B2");
  // ZB-H1: backward split into the input-gradient part (B) and the weight-gradient part (W).
  CHECK(to_string(stage_actions({ScheduleKind::zero_bubble, 1}, 2, 0, 2)) == "F0 F1 B0 W0 B1 W1");
  // Interleaved, p = 2, v = 2, m = 4, stage 0: warm-up (p − 1)·2 + (v − 1)·p = 4 virtual
  // forwards: micro-batches 0, 1 on chunk 0, then 0, 1 on chunk 1 (Megatron's order).
  const auto a = stage_actions({ScheduleKind::interleaved, 2}, 2, 0, 4);
  CHECK(to_string(a) == "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  CHECK(a.size() == 16);
  CHECK_THROWS_WITH_AS(stage_actions({ScheduleKind::interleaved, 2}, 4, 0, 6),
                       "--schedule: interleaved 1F1B needs the micro-batches per step (6) to be "
                       "a multiple of pp = 4 (as Megatron-LM requires)",
                       Error);
}

TEST_CASE("1f1b-overlap: F0, then each forward merged with the backward before it") {
  const Schedule s{ScheduleKind::one_f_one_b_overlap, 1};
  CHECK(to_string(s) == "1f1b-overlap");
  CHECK(to_string(parse_schedule("1f1b-overlap", "x")) == "1f1b-overlap");
  const auto a = stage_actions(s, 1, 0, 4);
  CHECK(to_string(a) == "F0 F1&B0 F2&B1 F3&B2 B3");
  REQUIRE(a.size() == 8);
  CHECK(!a[0].merged);
  CHECK(a[1].merged);   // F1, run with B0
  CHECK(!a[2].merged);  // B0
  CHECK(!a[7].merged);
  // One micro-batch: nothing to merge.
  CHECK(to_string(stage_actions(s, 1, 0, 1)) == "F0 B0");
  CHECK_THROWS_WITH_AS(parse_schedule("1f1b-merged", "--schedule"),
                       "--schedule: '1f1b-merged': expected gpipe, 1f1b, interleaved:V, "
                       "interleaved-overlap:V, zb or 1f1b-overlap",
                       Error);
}

TEST_CASE("interleaved-overlap: Megatron's interleaved order, each steady-state forward merged") {
  const auto s = parse_schedule("interleaved-overlap:2", "--schedule");
  CHECK(s.kind == ScheduleKind::interleaved);
  CHECK(s.virtual_stages == 2);
  CHECK(s.overlap);
  CHECK(s.merges());
  CHECK(!parse_schedule("interleaved:2", "x").merges());
  CHECK(parse_schedule("1f1b-overlap", "x").merges());
  CHECK(to_string(s) == "interleaved-overlap:2");
  CHECK(s != Schedule{ScheduleKind::interleaved, 2});
  // p = 2, v = 2, m = 4, stage 0: the interleaved order of the test above, its four steady-state
  // forwards each run with the backward after it.
  const auto a = stage_actions(s, 2, 0, 4);
  CHECK(to_string(a) == "F0 F1 F0.1 F1.1 F2&B0.1 F3&B1.1 F2.1&B0 F3.1&B1 B2.1 B3.1 B2 B3");
  CHECK_THROWS_WITH_AS(parse_schedule("interleaved-overlap:1", "--schedule"),
                       "--schedule: 'interleaved-overlap:1': the overlapped interleaved schedule "
                       "needs 2 or more virtual stages (without PP, 1f1b-overlap)",
                       Error);
  CHECK_THROWS_AS(parse_schedule("interleaved-overlap:", "--schedule"), Error);
}

TEST_CASE("interleaved with a micro-batch group: Megatron's schedule table and warm-up") {
  const auto s = parse_schedule("interleaved:2:3", "--schedule");
  CHECK(s.group == 3);
  CHECK(to_string(s) == "interleaved:2:3");
  CHECK(to_string(parse_schedule("interleaved-overlap:4:8", "x")) == "interleaved-overlap:4:8");
  // p = 2, v = 2, m = 6, groups of 3: micro-batches 0–2 on chunk 0, then on chunk 1, then 3–5
  // the same way; stage 0's warm-up is 2·(p − 1) + (v − 1)·G = 5 virtual forwards.
  CHECK(to_string(stage_actions(s, 2, 0, 6)) ==
        "F0 F1 F2 F0.1 F1.1 F2.1 B0.1 F3 B1.1 F4 B2.1 F5 B0 F3.1 B1 F4.1 B2 F5.1 B3.1 B4.1 B5.1 "
        "B3 B4 B5");
  // A group of pp is Megatron's default order.
  CHECK(stage_actions({ScheduleKind::interleaved, 2, false, 2}, 2, 0, 4) ==
        stage_actions({ScheduleKind::interleaved, 2}, 2, 0, 4));
  // Megatron's rules: G in [pp, m], and a last group of 0 or at least pp micro-batches.
  const Schedule g5{ScheduleKind::interleaved, 2, false, 5};
  CHECK(!interleaving_error(g5, 4, 9));  // groups of 5 and 4
  CHECK(interleaving_error(g5, 4, 7) ==
        "groups of 5 leave a last group of 2 of the 7 micro-batches per step, fewer than pp = 4 "
        "(as Megatron-LM refuses)");
  CHECK(interleaving_error(g5, 8, 16) ==
        "the micro-batch group (5) must be at least pp = 8 (as Megatron-LM requires)");
  CHECK(interleaving_error(g5, 2, 4) ==
        "the micro-batch group (5) exceeds the micro-batches per step (4)");
  CHECK(!interleaving_error({ScheduleKind::interleaved, 2}, 4, 8));
  CHECK(!interleaving_error({ScheduleKind::one_f_one_b, 1}, 4, 7));
  CHECK_THROWS_WITH_AS(stage_actions(g5, 4, 0, 7),
                       "--schedule: groups of 5 leave a last group of 2 of the 7 micro-batches "
                       "per step, fewer than pp = 4 (as Megatron-LM refuses)",
                       Error);
  // Every stage runs every pass once and the orders do not deadlock.
  const auto g5_orders = orders(g5, 4, 9);
  for (const auto& o : g5_orders) CHECK(o.size() == 36);
  const std::vector<double> ones(8, 1.0), twos(8, 2.0), zeros(8, 0.0);
  CHECK(play_schedule(g5_orders, 9, {ones, twos, zeros}).has_value());
  // The smallest group Megatron takes: pp when it divides m; DeepSeek-V3's 120 micro-batches on
  // 16 stages: 16 leaves 8, 17–19 leave 1, 12 and 6, 20 divides them.
  CHECK(smallest_microbatch_group(4, 8) == 4);
  CHECK(smallest_microbatch_group(4, 9) == 5);
  CHECK(smallest_microbatch_group(16, 120) == 20);
  CHECK(!smallest_microbatch_group(4, 3));
  CHECK_THROWS_AS(parse_schedule("interleaved:2:0", "--schedule"), Error);
  CHECK_THROWS_AS(parse_schedule("interleaved:2:x", "--schedule"), Error);
  CHECK_THROWS_AS(parse_schedule("interleaved:2:", "--schedule"), Error);
}

TEST_CASE("play_schedule: merged pairs wait on a one-directional 1F1B, not on an interleaved one") {
  // 1F1B, 2 stages, 3 micro-batches, F = 1, B = 2: (m + pp − 1)(F + B) = 12.
  const PassTimes one_chunk{{1, 1}, {2, 2}, {0, 0}};
  const auto plain = play_schedule(orders({ScheduleKind::one_f_one_b, 1}, 2, 3), 3, one_chunk);
  REQUIRE(plain);
  CHECK(plain->end_s[0] == doctest::Approx(12));
  // Merged (stage 0: F0 F1 F2&B0 B1 B2; stage 1: F0 F1&B0 F2&B1 B2). Stage 1: F0 1–2, F1&B0
  // 2–5. Stage 0: F0 0–1, F1 1–2, F2&B0 waits for stage 1's B0: 5–8. Stage 1: F2&B1 waits for
  // stage 0's F2 (6): 6–9. Stage 0: B1 9–11; stage 1: B2 9–11; stage 0: B2 11–13. Each pair
  // waits for its neighbour's: 13 > 12, and the gap grows with the micro-batches.
  const auto merged =
      play_schedule(orders({ScheduleKind::one_f_one_b_overlap, 1}, 2, 3), 3, one_chunk);
  REQUIRE(merged);
  CHECK(merged->end_s[0] == doctest::Approx(13));
  // Interleaved, p = 2, v = 2, m = 4, F = 1 and B = 2 per chunk: each stage runs 24 of work and
  // waits 3 at the start, merged or not, since the stages' warm-ups differ by two chunks.
  const PassTimes two_chunks{{1, 1, 1, 1}, {2, 2, 2, 2}, {0, 0, 0, 0}};
  const auto inter = play_schedule(orders({ScheduleKind::interleaved, 2}, 2, 4), 4, two_chunks);
  const auto inter_merged =
      play_schedule(orders({ScheduleKind::interleaved, 2, true}, 2, 4), 4, two_chunks);
  REQUIRE(inter);
  REQUIRE(inter_merged);
  CHECK(inter->end_s[0] == doctest::Approx(27));
  CHECK(inter_merged->end_s[0] == doctest::Approx(27));
  CHECK(inter_merged->end_s[1] == doctest::Approx(inter->end_s[1]));
}

TEST_CASE("stage balancing by time gives the ends fewer layers when they are heavy") {
  // 10 layers of 1 s on 4 stages, the last stage also runs 2 s of logits: the slowest stage can
  // be held to 3 s (3 + 3 + 3 + 1 + 2).
  const auto c = balanced_chunks(10, 4, 1.0, 0.0, 2.0);
  CHECK(c == std::vector<std::int64_t>{3, 3, 3, 1});
  // Llama 3 405B: 126 layers on 16 stages, ends nearly free: 8 layers at most per stage.
  const auto l = balanced_chunks(126, 16, 1.0, 0.01, 0.01);
  std::int64_t sum = 0, most = 0;
  for (auto v : l) {
    sum += v;
    most = std::max(most, v);
  }
  CHECK(sum == 126);
  CHECK(most == 8);
}

TEST_CASE("play_schedule: 1F1B, GPipe and zero-bubble at fixed pass times, by hand") {
  // 1F1B, 2 stages, 2 micro-batches, F = 1, B = 2. Stage 1: F0 1–2, B0 2–4, F1 4–5 (stage 0's
  // F1 ended at 2), B1 5–7. Stage 0: F0 0–1, F1 1–2, B0 4–6 (after stage 1's B0), B1 7–9.
  // (m + pp − 1)(F + B) = 9.
  const PassTimes uniform{{1, 1}, {2, 2}, {0, 0}};
  const auto one = play_schedule(orders({ScheduleKind::one_f_one_b, 1}, 2, 2), 2, uniform);
  REQUIRE(one);
  CHECK(one->end_s == std::vector<double>{9, 7});
  CHECK(one->last_start_s == std::vector<double>{7, 5});
  // GPipe, 3 micro-batches: stage 1 runs F0..F2 at 1–2, 2–3, 3–4, then B0..B2 4–10; stage 0's
  // backwards follow stage 1's ends (6, 8, 10): 6–8, 8–10, 10–12.
  const auto gp = play_schedule(orders({ScheduleKind::gpipe, 1}, 2, 3), 3, uniform);
  REQUIRE(gp);
  CHECK(gp->end_s == std::vector<double>{12, 10});
  // ZB-H1 with the backward split B = 1, W = 1: stage 1 F0 1–2 B0 2–3 W0 3–4 F1 4–5 B1 5–6
  // W1 6–7; stage 0 F0 0–1 F1 1–2 B0 3–4 W0 4–5 B1 6–7 W1 7–8.
  const auto zb = play_schedule(orders({ScheduleKind::zero_bubble, 1}, 2, 2), 2,
                                PassTimes{{1, 1}, {1, 1}, {1, 1}});
  REQUIRE(zb);
  CHECK(zb->end_s == std::vector<double>{8, 7});
  CHECK(zb->last_start_s == std::vector<double>{7, 6});
  // Orders that wait on each other forever: stage 0 wants stage 1's backward before it sends
  // its forward.
  const std::vector<std::vector<PipelineAction>> stuck{
      {{PassKind::backward, 0, 0}, {PassKind::forward, 0, 0}},
      {{PassKind::forward, 0, 0}, {PassKind::backward, 0, 0}}};
  CHECK_FALSE(play_schedule(stuck, 1, uniform));
}
