#pragma once
// A search's thread pool: `threads` workers (the calling thread is one) take indices 0 .. n − 1
// in turn; each worker builds its own state once (`make_state`: a route and price cache) and
// calls `body(state, i)`. An exception a worker throws (anything: a bad_alloc as much as an
// Error) stops the others taking new indices and is rethrown here once all have joined, so a
// command reports it as one line instead of std::terminate ending the process.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace meshsim {

template <class MakeState, class Body>
void run_worker_pool(std::size_t n, std::size_t threads, MakeState make_state, Body body) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, std::max<std::size_t>(n, 1));
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    try {
      auto state = make_state();
      for (std::size_t i = next++; i < n; i = next++) body(state, i);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = n;  // the other workers stop after their current index
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace meshsim
