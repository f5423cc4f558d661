#pragma once
// Pending-event queues. Every event has a total order (time, priority, insertion sequence), so
// ties never depend on pointer values or hash order (DESIGN.md "Engine rules"). The queue is a
// d-ary heap on a vector; cancellation is lazy (the simulator skips dead slots when popped).
#include <cstdint>
#include <vector>

#include "core/units.hpp"

namespace meshsim {

struct QueueEntry {
  Time time;
  std::int32_t priority = 0;  // lower runs first among events at the same time
  std::uint32_t slot = 0;     // index of the action in the simulator's slot table
  std::uint64_t seq = 0;      // insertion order: the final tie-breaker
};

constexpr bool runs_before(const QueueEntry& a, const QueueEntry& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.seq < b.seq;
}

// Min-heap with `Arity` children per node. Arity 2 is the classic binary heap; 4 trades more
// comparisons per level for half the depth and better cache behaviour on large queues.
template <unsigned Arity>
class DaryHeap {
  static_assert(Arity >= 2);

 public:
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  const QueueEntry& top() const { return v_.front(); }
  void reserve(std::size_t n) { v_.reserve(n); }
  void clear() { v_.clear(); }

  void push(const QueueEntry& e) {
    std::size_t i = v_.size();
    v_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / Arity;
      if (!runs_before(e, v_[parent])) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }

  QueueEntry pop() {
    QueueEntry result = v_.front();
    const QueueEntry last = v_.back();
    v_.pop_back();
    const std::size_t n = v_.size();
    if (n == 0) return result;
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = i * Arity + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + Arity < n ? first + Arity : n;
      for (std::size_t c = first + 1; c < end; ++c)
        if (runs_before(v_[c], v_[best])) best = c;
      if (!runs_before(v_[best], last)) break;
      v_[i] = v_[best];
      i = best;
    }
    v_[i] = last;
    return result;
  }

 private:
  std::vector<QueueEntry> v_;
};

using BinaryHeapQueue = DaryHeap<2>;
using QuaternaryHeapQueue = DaryHeap<4>;

}  // namespace meshsim
