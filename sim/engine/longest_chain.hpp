#pragma once
// The longest chain of ops between two ops of a graph: the least time any replay can take from
// `from`'s start to `to`'s end. An op starts only after its dependencies and the op before it on
// its stream have finished, and replay never runs an op faster than its duration (interference
// and link sharing only slow it), so every chain of such edges from `from` to `to` is a lower
// bound on that span; the longest is the tightest. Ops that do not follow `from` by such a chain
// are left out (they may have run before it). The search's step-time bound sums these over a
// rank's layer passes (strategy/trace_builder.hpp).
#include <span>
#include <vector>

#include "core/units.hpp"
#include "engine/op_graph.hpp"

namespace meshsim {

// The ops on some chain from `from` to `to`, both included, in insertion order (the only ones
// whose durations the longest chain depends on); empty when `to` does not follow `from`. Ops are
// in insertion order, which is topological for dependencies and stream order alike.
std::vector<OpId> chain_ops(const OpGraph& g, OpId from, OpId to);

// The longest chain's length from `from`'s start to `to`'s end, each op at `duration[op]` (its
// graph duration where `duration` is shorter than the graph); zero when `to` does not follow
// `from`.
Time longest_chain(const OpGraph& g, OpId from, OpId to, std::span<const Time> duration = {});

}  // namespace meshsim
