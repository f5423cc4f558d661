#include "engine/op_graph.hpp"

#include <stdexcept>

namespace meshsim {

const char* stream_kind_name(StreamKind k) {
  switch (k) {
    case StreamKind::compute:
      return "compute";
    case StreamKind::tp:
      return "tp";
    case StreamKind::dp:
      return "dp";
    case StreamKind::pp:
      return "pp";
    case StreamKind::cp:
      return "cp";
    case StreamKind::ep:
      return "ep";
    case StreamKind::dp_gather:
      return "dp_gather";
    case StreamKind::p2p:
      return "p2p";
  }
  return "?";
}

StreamId OpGraph::add_stream(std::int32_t rank, StreamKind kind, std::string label) {
  if (label.empty()) label = "rank" + std::to_string(rank) + "." + stream_kind_name(kind);
  streams_.push_back(Stream{rank, kind, std::move(label), {}});
  return StreamId{static_cast<std::uint32_t>(streams_.size() - 1)};
}

OpId OpGraph::add(Op op) {
  if (op.stream.value >= streams_.size()) throw std::logic_error("op on unknown stream");
  const OpId id{static_cast<std::uint32_t>(ops_.size())};
  for (OpId d : op.deps)
    if (d.value >= id.value) throw std::logic_error("op '" + op.name + "' depends on a later op");
  for (OpId d : op.deps) ops_[d.value].dependents.push_back(id);
  streams_[op.stream.value].ops.push_back(id);
  ops_.push_back(std::move(op));
  return id;
}

OpId OpGraph::add_op(StreamId stream, std::string name, Time duration, std::vector<OpId> deps) {
  return add(Op{std::move(name), stream, std::move(deps), duration, {}, {}});
}

OpId OpGraph::add_async_op(StreamId stream, std::string name, AsyncStart start,
                           std::vector<OpId> deps) {
  return add(Op{std::move(name), stream, std::move(deps), Time::zero(), std::move(start), {}});
}

}  // namespace meshsim
