#include "engine/event_queue.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "core/rng.hpp"

using namespace meshsim;

TEST_CASE_TEMPLATE("queue pops in (time, priority, sequence) order", Q, BinaryHeapQueue,
                   QuaternaryHeapQueue) {
  Q q;
  std::vector<QueueEntry> all;
  Rng rng(7);
  for (std::uint64_t seq = 0; seq < 5000; ++seq) {
    // Few distinct times and priorities so ties are common.
    QueueEntry e{Time::ns(static_cast<std::int64_t>(rng.below(20))),
                 static_cast<std::int32_t>(rng.below(3)), static_cast<std::uint32_t>(seq), seq};
    all.push_back(e);
    q.push(e);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return runs_before(a, b); });
  for (const auto& expected : all) {
    REQUIRE(!q.empty());
    const auto got = q.pop();
    CHECK(got.seq == expected.seq);
  }
  CHECK(q.empty());
}

TEST_CASE_TEMPLATE("equal time and priority run in insertion order", Q, BinaryHeapQueue,
                   QuaternaryHeapQueue) {
  Q q;
  // Interleave a later event between the ties so the heap has to reorder around them.
  for (std::uint64_t s = 0; s < 100; ++s) {
    q.push(QueueEntry{Time::us(1), 0, 0, 2 * s});
    q.push(QueueEntry{Time::us(2), 0, 0, 2 * s + 1});
  }
  for (std::uint64_t s = 0; s < 100; ++s) CHECK(q.pop().seq == 2 * s);
  for (std::uint64_t s = 0; s < 100; ++s) CHECK(q.pop().seq == 2 * s + 1);
}

TEST_CASE_TEMPLATE("interleaved push and pop keep heap order", Q, BinaryHeapQueue,
                   QuaternaryHeapQueue) {
  Q q;
  Rng rng(3);
  std::uint64_t seq = 0;
  QueueEntry last{Time::zero(), -1, 0, 0};
  for (int round = 0; round < 2000; ++round) {
    // Only push at or after the last popped time, as a simulator does.
    q.push(QueueEntry{last.time + Time::ns(static_cast<std::int64_t>(rng.below(50))), 0, 0, seq++});
    if (rng.below(2) == 0) {
      const auto e = q.pop();
      CHECK(!runs_before(e, last));
      last = e;
    }
  }
}
