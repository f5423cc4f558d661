#include "strategy/pipeline_schedule.hpp"

#include <doctest/doctest.h>

#include "core/error.hpp"
#include "strategy/trace_builder.hpp"

using namespace meshsim;

TEST_CASE("1F1B: warm-up forwards, steady one-forward-one-backward, cool-down backwards") {
  const Schedule s{ScheduleKind::one_f_one_b, 1};
  // Stage 0 of 4 with 6 micro-batches: 3 warm-up forwards.
  CHECK(to_string(stage_actions(s, 4, 0, 6)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  // The last stage alternates from the start.
  CHECK(to_string(stage_actions(s, 4, 3, 6)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages.
  CHECK(to_string(stage_actions(s, 4, 0, 2)) == "F0 F1 B0 B1");
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
