#pragma once
// Replays an OpGraph on a simulator: an op starts when it heads its stream, the stream is idle,
// and all its dependencies have finished. Produces per-op start/end times.
#include <stdexcept>
#include <vector>

#include "core/error.hpp"
#include "engine/op_graph.hpp"
#include "engine/simulator.hpp"

namespace meshsim {

struct OpTiming {
  Time start = Time::max();
  Time end = Time::max();
  bool finished() const { return end != Time::max(); }
};

struct ReplayResult {
  std::vector<OpTiming> ops;  // indexed by OpId
  Time makespan;
};

template <class Sim>
class Replay {
 public:
  Replay(const OpGraph& graph, Sim& sim, OpHooks* hooks = nullptr)
      : g_(graph), sim_(sim), hooks_(hooks) {}

  // Schedules the graph's first ops at the simulator's current time, runs the simulator to
  // completion, and checks that every op finished. Insertion order is a topological order that
  // respects every stream (dependencies point to earlier ops), so only a model that never
  // completes an asynchronous op can leave one unfinished; that is an Error naming the op.
  ReplayResult run() {
    start_time_ = sim_.now();
    timing_.assign(g_.op_count(), OpTiming{});
    waiting_.resize(g_.op_count());
    for (std::size_t i = 0; i < g_.op_count(); ++i)
      waiting_[i] =
          static_cast<std::uint32_t>(g_.op(OpId{static_cast<std::uint32_t>(i)}).deps.size());
    head_.assign(g_.stream_count(), 0);
    busy_.assign(g_.stream_count(), false);
    for (std::uint32_t s = 0; s < g_.stream_count(); ++s) try_start(StreamId{s});
    sim_.run();
    Time makespan = Time::zero();
    for (std::size_t i = 0; i < timing_.size(); ++i) {
      if (!timing_[i].finished()) {
        const Op& op = g_.op(OpId{static_cast<std::uint32_t>(i)});
        throw Error(
            "", "",
            "op '" + op.name + "' on stream '" + g_.stream(op.stream).label + "' never finished");
      }
      if (timing_[i].end - start_time_ > makespan) makespan = timing_[i].end - start_time_;
    }
    return ReplayResult{std::move(timing_), makespan};
  }

 private:
  void try_start(StreamId s) {
    const Stream& st = g_.stream(s);
    if (busy_[s.value] || head_[s.value] >= st.ops.size()) return;
    const OpId id = st.ops[head_[s.value]];
    if (waiting_[id.value] != 0) return;
    busy_[s.value] = true;
    timing_[id.value].start = sim_.now();
    if (hooks_) hooks_->op_started(g_, id, sim_.now());
    const Op& op = g_.op(id);
    if (op.start) {
      op.start(id, [this, id] { finish(id); });
    } else {
      sim_.schedule_after(op.duration, [this, id] { finish(id); });
    }
  }

  void finish(OpId id) {
    if (timing_[id.value].finished()) throw std::logic_error("op finished twice");
    timing_[id.value].end = sim_.now();
    if (hooks_) hooks_->op_finished(g_, id, sim_.now());
    const Op& op = g_.op(id);
    busy_[op.stream.value] = false;
    ++head_[op.stream.value];
    for (OpId d : op.dependents) {
      --waiting_[d.value];
      if (waiting_[d.value] == 0) try_start(g_.op(d).stream);
    }
    try_start(op.stream);
  }

  const OpGraph& g_;
  Sim& sim_;
  OpHooks* hooks_;
  Time start_time_;
  std::vector<OpTiming> timing_;
  std::vector<std::uint32_t> waiting_;
  std::vector<std::size_t> head_;
  std::vector<bool> busy_;
};

}  // namespace meshsim
