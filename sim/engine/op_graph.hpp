#pragma once
// Ops on streams. A stream is an in-order queue on one rank (its compute stream, or one per
// communication group kind), like a CUDA stream: one op at a time, in the order added. Ops may
// also depend on ops of other streams (an all-reduce waits for the backward GEMM that produced
// its gradient). The graph is built first, then replayed on a simulator (engine/replay.hpp).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.hpp"

namespace meshsim {

// dp_gather: ZeRO-3/FSDP weight all-gathers, on their own stream as FSDP2 does, so a prefetch
// never queues behind a gradient reduce-scatter. host: the CPU thread that launches a rank's
// kernels (its ops are launch times, not GPU work).
enum class StreamKind : std::uint8_t { compute, tp, dp, pp, cp, ep, p2p, dp_gather, host };
const char* stream_kind_name(StreamKind k);

struct StreamId {
  std::uint32_t value = 0;
  auto operator<=>(const StreamId&) const = default;
};
struct OpId {
  std::uint32_t value = 0;
  auto operator<=>(const OpId&) const = default;
};

// Called when an asynchronous op starts; the op ends when the model calls `done` (from an event
// it scheduled on the same simulator). This is where the network plugs in: a collective's
// duration depends on what else is on the links when it starts.
using OpDone = std::function<void()>;
using AsyncStart = std::function<void(OpId, OpDone done)>;

struct Stream {
  std::int32_t rank = 0;
  StreamKind kind = StreamKind::compute;
  std::string label;
  std::vector<OpId> ops;  // in issue order
};

// One op as the graph holds it, read through OpGraph::op. Its name, dependencies and start are
// views into the graph's flat arrays (valid until the graph grows): a step of the folded replay
// adds ~10^5 ops per layout, and a string, a vector and a std::function of its own per op made up
// a fifth of a search's time (allocation, page faults on fresh memory; issue 17).
struct Op {
  std::string_view name;
  StreamId stream;
  std::span<const OpId> deps;  // must all finish before this op starts
  Time duration;               // used when `start` is null
  const AsyncStart* start;     // optional: the op's end is decided by a model
};

class OpGraph {
 public:
  StreamId add_stream(std::int32_t rank, StreamKind kind, std::string label = {});
  // Dependencies must name ops already added, so the dependency relation is acyclic by
  // construction (stream order can still deadlock; replay detects and reports that).
  OpId add_op(StreamId stream, std::string_view name, Time duration,
              std::span<const OpId> deps = {});
  OpId add_op(StreamId stream, std::string_view name, Time duration,
              std::initializer_list<OpId> deps) {
    return add_op(stream, name, duration, std::span<const OpId>(deps.begin(), deps.size()));
  }
  OpId add_async_op(StreamId stream, std::string_view name, AsyncStart start,
                    std::span<const OpId> deps = {});
  OpId add_async_op(StreamId stream, std::string_view name, AsyncStart start,
                    std::initializer_list<OpId> deps) {
    return add_async_op(stream, name, std::move(start),
                        std::span<const OpId>(deps.begin(), deps.size()));
  }

  // Room for `ops` ops: builders of large graphs call it to avoid regrowing the op vector.
  // Names and dependencies get room for ~24 characters and 2 ids per op.
  void reserve(std::size_t ops) {
    ops_.reserve(ops);
    names_.reserve(24 * ops);
    deps_.reserve(2 * ops);
  }

  Op op(OpId id) const {
    const Record& r = ops_[id.value];
    return Op{std::string_view(names_).substr(r.name_begin, r.name_size), r.stream,
              std::span<const OpId>(deps_).subspan(r.deps_begin, r.deps_size), r.duration,
              r.async == kNone ? nullptr : &async_[r.async]};
  }
  const Stream& stream(StreamId id) const { return streams_[id.value]; }
  std::size_t op_count() const { return ops_.size(); }
  std::size_t stream_count() const { return streams_.size(); }

  // The ops that list each op in their deps, in the order they were added, as compressed rows:
  // op i's dependents are ops[begin[i] .. begin[i + 1]).
  struct Dependents {
    std::vector<std::uint32_t> begin;
    std::vector<OpId> ops;
  };
  Dependents dependents() const;

 private:
  static constexpr std::uint32_t kNone = 0xffffffffU;
  struct Record {
    std::uint32_t name_begin = 0, name_size = 0;
    StreamId stream;
    std::uint32_t deps_begin = 0, deps_size = 0;
    std::uint32_t async = kNone;  // index into async_
    Time duration;
  };
  OpId add(StreamId stream, std::string_view name, Time duration, std::span<const OpId> deps,
           std::uint32_t async);
  std::vector<Record> ops_;
  std::string names_;       // every op's name, back to back
  std::vector<OpId> deps_;  // every op's dependencies, back to back
  std::vector<AsyncStart> async_;
  std::vector<Stream> streams_;
};

// Tracing hangs off these hooks, not off logging inside models.
class OpHooks {
 public:
  virtual ~OpHooks() = default;
  virtual void op_started(const OpGraph&, OpId, Time) {}
  virtual void op_finished(const OpGraph&, OpId, Time) {}
};

}  // namespace meshsim
