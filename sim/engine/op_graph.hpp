#pragma once
// Ops on streams. A stream is an in-order queue on one rank (its compute stream, or one per
// communication group kind), like a CUDA stream: one op at a time, in the order added. Ops may
// also depend on ops of other streams (an all-reduce waits for the backward GEMM that produced
// its gradient). The graph is built first, then replayed on a simulator (engine/replay.hpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/units.hpp"

namespace meshsim {

// dp_gather: ZeRO-3/FSDP weight all-gathers, on their own stream as FSDP2 does, so a prefetch
// never queues behind a gradient reduce-scatter.
enum class StreamKind : std::uint8_t { compute, tp, dp, pp, cp, ep, p2p, dp_gather };
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

struct Op {
  std::string name;
  StreamId stream;
  std::vector<OpId> deps;        // must all finish before this op starts
  Time duration;                 // used when `start` is empty
  AsyncStart start;              // optional: the op's end is decided by a model
  std::vector<OpId> dependents;  // filled by the graph: ops that list this one in deps
};

class OpGraph {
 public:
  StreamId add_stream(std::int32_t rank, StreamKind kind, std::string label = {});
  // Dependencies must name ops already added, so the dependency relation is acyclic by
  // construction (stream order can still deadlock; replay detects and reports that).
  OpId add_op(StreamId stream, std::string name, Time duration, std::vector<OpId> deps = {});
  OpId add_async_op(StreamId stream, std::string name, AsyncStart start,
                    std::vector<OpId> deps = {});

  // Room for `ops` ops: builders of large graphs call it to avoid regrowing the op vector.
  void reserve(std::size_t ops) { ops_.reserve(ops); }

  const Op& op(OpId id) const { return ops_[id.value]; }
  const Stream& stream(StreamId id) const { return streams_[id.value]; }
  std::size_t op_count() const { return ops_.size(); }
  std::size_t stream_count() const { return streams_.size(); }

 private:
  OpId add(Op op);
  std::vector<Op> ops_;
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
