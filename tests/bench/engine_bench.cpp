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
  const auto pending = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    BasicSimulator<Q> sim;
    Rng rng(1);
    std::vector<EventHandle> handles(pending);
    std::uint64_t budget = 2'000'000;
    std::function<void()> fire;
    struct Ctx {
      BasicSimulator<Q>* sim;
      Rng* rng;
      std::vector<EventHandle>* handles;
      std::uint64_t* budget;
    } ctx{&sim, &rng, &handles, &budget};
    // Each event reschedules one event; a pointer-sized capture keeps std::function allocation-free.
    struct Fire {
      Ctx* c;
      void operator()() const {
        if (*c->budget == 0) return;
        --*c->budget;
        auto& h = *c->handles;
        const auto slot = c->rng->below(h.size());
        if (c->rng->below(10) == 0) {
          c->sim->cancel(h[slot]);
          h[slot] = c->sim->schedule_after(Time::ns(static_cast<std::int64_t>(c->rng->below(1000))), Fire{c});
        }
        h[c->rng->below(h.size())] =
            c->sim->schedule_after(Time::ns(static_cast<std::int64_t>(1 + c->rng->below(1000))), Fire{c});
      }
    };
    for (std::size_t i = 0; i < pending; ++i)
      handles[i] = sim.schedule_at(Time::ns(static_cast<std::int64_t>(rng.below(1000))), Fire{&ctx});
    state.ResumeTiming();
    sim.run();
    state.counters["events"] = benchmark::Counter(static_cast<double>(sim.events_processed()),
                                                  benchmark::Counter::kIsRate);
  }
}
BENCHMARK_TEMPLATE(BM_ScheduleAndPop, BinaryHeapQueue)->Arg(10'000)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndPop, QuaternaryHeapQueue)->Arg(10'000)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndPop, BinaryHeapQueue)->Arg(1'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ScheduleAndPop, QuaternaryHeapQueue)->Arg(1'000'000)->Unit(benchmark::kMillisecond);
