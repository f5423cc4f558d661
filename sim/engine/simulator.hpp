#pragma once
// The discrete-event loop. A simulator is a plain value: no global or static state, so tests and
// parallel sweeps can hold many of them, in as many threads (DESIGN.md "Engine rules").
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"
#include "engine/event_queue.hpp"

namespace meshsim {

// An event's behaviour: a typed callable, never a void* payload or an enum dispatch.
using Action = std::function<void()>;

struct EventHandle {
  std::uint32_t slot = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t generation = 0;
  bool valid() const { return slot != std::numeric_limits<std::uint32_t>::max(); }
};

template <class Queue>
class BasicSimulator {
 public:
  Time now() const { return now_; }
  std::uint64_t events_processed() const { return processed_; }
  std::size_t events_pending() const { return live_; }

  // Schedules `action` at absolute time `when` (>= now). Equal (time, priority) run in the order
  // they were scheduled.
  EventHandle schedule_at(Time when, Action action, std::int32_t priority = 0) {
    if (when < now_)
      throw std::logic_error("event scheduled in the past: " + std::to_string(when.picoseconds()) +
                             " ps < now " + std::to_string(now_.picoseconds()) + " ps");
    std::uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[slot];
    s.action = std::move(action);
    s.live = true;
    queue_.push(QueueEntry{when, priority, slot, next_seq_++});
    ++live_;
    return EventHandle{slot, s.generation};
  }

  EventHandle schedule_after(Time delay, Action action, std::int32_t priority = 0) {
    // Integer picoseconds hold 106 days; a run past that is an input beyond range, said
    // plainly rather than wrapping around.
    if (delay > Time::max() - now_)
      throw Error("", "",
                  "the simulated time passes 2^63 ps (about 106 days): the input is "
                  "beyond what meshsim can time (a link or GPU this slow, or a job this "
                  "long)");
    return schedule_at(now_ + delay, std::move(action), priority);
  }

  // Lazy cancellation: the entry stays in the heap and is skipped when popped. Returns false if
  // the event already ran or was cancelled.
  bool cancel(EventHandle h) {
    if (!h.valid() || h.slot >= slots_.size()) return false;
    Slot& s = slots_[h.slot];
    if (s.generation != h.generation || !s.live) return false;
    s.live = false;
    s.action = nullptr;
    --live_;
    return true;
  }

  // Runs the next live event; false when none is left.
  bool step() {
    while (!queue_.empty()) {
      const QueueEntry e = queue_.pop();
      Slot& s = slots_[e.slot];
      if (!s.live) {
        release(e.slot);
        continue;
      }
      now_ = e.time;
      Action action = std::move(s.action);
      s.live = false;
      --live_;
      release(e.slot);
      ++processed_;
      action();
      return true;
    }
    return false;
  }

  void run() {
    while (step()) {
    }
  }

  // Runs every event at or before `limit`, then advances the clock to `limit`.
  void run_until(Time limit) {
    while (!queue_.empty() && queue_.top().time <= limit) step();
    if (now_ < limit) now_ = limit;
  }

 private:
  struct Slot {
    Action action;
    std::uint32_t generation = 0;
    bool live = false;
  };

  void release(std::uint32_t slot) {
    ++slots_[slot].generation;  // stale handles to this slot can no longer cancel a new event
    free_.push_back(slot);
  }

  Time now_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
  std::size_t live_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  Queue queue_;
};

using Simulator = BasicSimulator<BinaryHeapQueue>;

}  // namespace meshsim
