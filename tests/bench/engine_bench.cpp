// Core event loop throughput: schedule + pop with a realistic mix (each event schedules its
// successor; 10% of events also cancel a pending event and schedule a replacement), on a queue
// holding ~10,000 pending events. Target (issue 2): >= 10 million events/s on 2 cores.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/rng.hpp"
#include "engine/simulator.hpp"

using namespace meshsim;

template <class Q>
static void BM_ScheduleAndPop(benchmark::State& state) {
  // `lanes` events are pending at any time: each event, when it fires, schedules its lane's
  // successor; one event in ten also cancels another lane's pending event and reschedules it.
  const auto lanes = static_cast<std::size_t>(state.range(0));
  std::uint64_t total = 0;
  for (auto _ : state) {
    state.PauseTiming();
    BasicSimulator<Q> sim;
    Rng rng(1);
    std::vector<EventHandle> handles(lanes);
    std::uint64_t budget = 2'000'000;
    struct Ctx {
      BasicSimulator<Q>* sim;
      Rng* rng;
      std::vector<EventHandle>* handles;
      std::uint64_t* budget;
    } ctx{&sim, &rng, &handles, &budget};
    // Two words of capture: std::function keeps it inline, no allocation per event.
    struct Fire {
      Ctx* c;
      std::size_t lane;
      void operator()() const {
        if (*c->budget == 0) return;
        --*c->budget;
        auto& h = *c->handles;
        auto& rng = *c->rng;
        h[lane] = c->sim->schedule_after(Time::ns(static_cast<std::int64_t>(1 + rng.below(1000))),
                                         Fire{c, lane});
        if (rng.below(10) == 0) {
          const auto victim = rng.below(h.size());
          if (c->sim->cancel(h[victim]))
            h[victim] = c->sim->schedule_after(Time::ns(static_cast<std::int64_t>(rng.below(1000))),
                                               Fire{c, victim});
        }
      }
    };
    for (std::size_t i = 0; i < lanes; ++i)
      handles[i] =
          sim.schedule_at(Time::ns(static_cast<std::int64_t>(rng.below(1000))), Fire{&ctx, i});
    state.ResumeTiming();
    sim.run();
    total += sim.events_processed();
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(total), benchmark::Counter::kIsRate);
}
// Pending-set sizes: ~100 (a folded training step), 1,000 and 10,000 (an unfolded 512-rank run
// has a few thousand streams), 1,000,000 (stress).
BENCHMARK_TEMPLATE(BM_ScheduleAndPop, BinaryHeapQueue)
    ->Arg(100)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndPop, QuaternaryHeapQueue)
    ->Arg(100)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);
