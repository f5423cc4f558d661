#include "engine/simulator.hpp"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/rng.hpp"

using namespace meshsim;

TEST_CASE_TEMPLATE("events run in time order, then priority, then scheduling order", Q,
                   BinaryHeapQueue, QuaternaryHeapQueue) {
  BasicSimulator<Q> sim;
  std::string log;
  sim.schedule_at(Time::us(2), [&] { log += "c"; });
  sim.schedule_at(
      Time::us(1), [&] { log += "b"; }, /*priority=*/1);
  sim.schedule_at(
      Time::us(1), [&] { log += "a"; }, /*priority=*/0);
  sim.schedule_at(Time::us(2), [&] { log += "d"; });
  sim.run();
  CHECK(log == "abcd");
  CHECK(sim.now() == Time::us(2));
  CHECK(sim.events_processed() == 4);
}

TEST_CASE_TEMPLATE("handlers can schedule further events, including at the current time", Q,
                   BinaryHeapQueue, QuaternaryHeapQueue) {
  BasicSimulator<Q> sim;
  std::vector<std::int64_t> times;
  std::function<void(int)> tick = [&](int left) {
    times.push_back(sim.now().picoseconds());
    if (left > 0) sim.schedule_after(Time::ps(left % 2 ? 0 : 10), [&, left] { tick(left - 1); });
  };
  sim.schedule_at(Time::zero(), [&] { tick(4); });
  sim.run();
  // left=4 → +10, 3 → +0, 2 → +10, 1 → +0: times 0, 10, 10, 20, 20.
  CHECK(times == std::vector<std::int64_t>{0, 10, 10, 20, 20});
}

TEST_CASE_TEMPLATE("cancelled events never run and handles do not outlive their slot", Q,
                   BinaryHeapQueue, QuaternaryHeapQueue) {
  BasicSimulator<Q> sim;
  int ran = 0;
  auto h1 = sim.schedule_at(Time::us(1), [&] { ran += 1; });
  auto h2 = sim.schedule_at(Time::us(2), [&] { ran += 10; });
  CHECK(sim.events_pending() == 2);
  CHECK(sim.cancel(h1));
  CHECK_FALSE(sim.cancel(h1));  // already cancelled
  CHECK(sim.events_pending() == 1);
  sim.run();
  CHECK(ran == 10);
  CHECK_FALSE(sim.cancel(h2));  // already ran
  // The slot of h1 is reused by a new event; the stale handle must not cancel it.
  sim.schedule_after(Time::us(1), [&] { ran += 100; });
  CHECK_FALSE(sim.cancel(h1));
  sim.run();
  CHECK(ran == 110);
  CHECK_FALSE(sim.cancel(EventHandle{}));
}

TEST_CASE_TEMPLATE("run_until stops at the limit and advances the clock", Q, BinaryHeapQueue,
                   QuaternaryHeapQueue) {
  BasicSimulator<Q> sim;
  int ran = 0;
  sim.schedule_at(Time::us(1), [&] { ++ran; });
  sim.schedule_at(Time::us(5), [&] { ++ran; });
  sim.run_until(Time::us(3));
  CHECK(ran == 1);
  CHECK(sim.now() == Time::us(3));
  sim.run();
  CHECK(ran == 2);
}

TEST_CASE("scheduling in the past is an internal error") {
  Simulator sim;
  sim.schedule_at(Time::us(2), [] {});
  sim.run();
  CHECK_THROWS_AS(sim.schedule_at(Time::us(1), [] {}), std::logic_error);
}

namespace {
// A busy random workload: each event schedules 0-2 more and cancels a random earlier one 10% of
// the time. Returns the log of (time, id) in execution order.
template <class Q>
std::vector<std::pair<std::int64_t, int>> random_run(std::uint64_t seed) {
  BasicSimulator<Q> sim;
  Rng rng(seed);
  std::vector<std::pair<std::int64_t, int>> log;
  std::vector<EventHandle> handles;
  int next_id = 0;
  std::function<void(int)> fire = [&](int id) {
    log.emplace_back(sim.now().picoseconds(), id);
    if (next_id > 20000) return;
    const auto children = 1 + rng.below(2);  // a growing population, bounded by next_id
    for (std::uint64_t c = 0; c < children; ++c) {
      const int child = next_id++;
      handles.push_back(sim.schedule_after(
          Time::ns(static_cast<std::int64_t>(rng.below(5))), [&, child] { fire(child); },
          static_cast<std::int32_t>(rng.below(2))));
    }
    if (rng.below(10) == 0 && !handles.empty()) sim.cancel(handles[rng.below(handles.size())]);
  };
  for (int i = 0; i < 8; ++i) {
    const int id = next_id++;
    handles.push_back(sim.schedule_at(Time::zero(), [&, id] { fire(id); }));
  }
  sim.run();
  return log;
}
}  // namespace

TEST_CASE_TEMPLATE("same inputs give the identical event log", Q, BinaryHeapQueue,
                   QuaternaryHeapQueue) {
  const auto a = random_run<Q>(11);
  const auto b = random_run<Q>(11);
  CHECK(a.size() > 1000);
  CHECK(a == b);
}

TEST_CASE("both queue implementations produce the same log") {
  CHECK(random_run<BinaryHeapQueue>(5) == random_run<QuaternaryHeapQueue>(5));
}

TEST_CASE("two simulators run in two threads without interfering") {
  const auto expected = random_run<BinaryHeapQueue>(99);
  std::vector<std::pair<std::int64_t, int>> r1, r2;
  std::thread t1([&] { r1 = random_run<BinaryHeapQueue>(99); });
  std::thread t2([&] { r2 = random_run<BinaryHeapQueue>(99); });
  t1.join();
  t2.join();
  CHECK(r1 == expected);
  CHECK(r2 == expected);
}
