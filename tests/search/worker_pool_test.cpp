#include "search/worker_pool.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace meshsim;

TEST_CASE("worker pool: every index once, one state per worker") {
  for (std::size_t threads : {1, 2, 3, 8}) {
    std::vector<std::atomic<int>> seen(100);
    std::atomic<int> states{0};
    run_worker_pool(
        seen.size(), threads, [&] { return ++states; }, [&](int&, std::size_t i) { ++seen[i]; });
    for (auto& s : seen) CHECK(s == 1);
    CHECK(states == static_cast<int>(threads));
  }
  // No work: nothing runs, nothing throws.
  run_worker_pool(
      0, 4, [] { return 0; }, [](int&, std::size_t) { FAIL("ran"); });
}

TEST_CASE("worker pool: a worker's exception (not only Error) reaches the caller") {
  // A bad_alloc in one worker (issue: search aborted with SIGABRT) is rethrown here after the
  // pool drains; the indices after it are not all taken.
  for (std::size_t threads : {1, 3}) {
    std::atomic<int> ran{0};
    CHECK_THROWS_AS(run_worker_pool(
                        1000, threads, [] { return 0; },
                        [&](int&, std::size_t i) {
                          ++ran;
                          if (i == 10) throw std::bad_alloc();
                          // Items that take time, so the other threads cannot have taken all
                          // of them before the pool sees the exception (they could in
                          // microseconds: a flaky failure).
                          std::this_thread::sleep_for(std::chrono::microseconds(200));
                        }),
                    std::bad_alloc);
    CHECK(ran < 1000);
  }
  CHECK_THROWS_WITH_AS(
      run_worker_pool(
          4, 2, []() -> int { throw std::runtime_error("no state"); }, [](int&, std::size_t) {}),
      "no state", std::runtime_error);
}
