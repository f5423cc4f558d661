#include "engine/op_graph.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"

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
    case StreamKind::host:
      return "host";
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

OpId OpGraph::add(StreamId stream, std::string_view name, Time duration, std::span<const OpId> deps,
                  std::uint32_t async) {
  if (stream.value >= streams_.size()) throw std::logic_error("op on unknown stream");
  const OpId id{static_cast<std::uint32_t>(ops_.size())};
  for (OpId d : deps)
    if (d.value >= id.value)
      throw std::logic_error("op '" + std::string(name) + "' depends on a later op");
  // Records index the flat arrays with 32 bits (as OpId does the ops): past that a graph is
  // refused, never wrapped around.
  constexpr std::size_t kMax = kNone;
  if (ops_.size() >= kMax || names_.size() + name.size() > kMax ||
      deps_.size() + deps.size() > kMax)
    throw Error("", "",
                "the step's op graph exceeds 2^32 ops, name characters or dependencies: simulate "
                "folded (one rank per stage) or fewer ranks");
  Record r;
  r.name_begin = static_cast<std::uint32_t>(names_.size());
  r.name_size = static_cast<std::uint32_t>(name.size());
  r.stream = stream;
  r.deps_begin = static_cast<std::uint32_t>(deps_.size());
  r.deps_size = static_cast<std::uint32_t>(deps.size());
  r.async = async;
  r.duration = duration;
  names_.append(name);
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  streams_[stream.value].ops.push_back(id);
  ops_.push_back(r);
  return id;
}

OpId OpGraph::add_op(StreamId stream, std::string_view name, Time duration,
                     std::span<const OpId> deps) {
  return add(stream, name, duration, deps, kNone);
}

OpId OpGraph::add_async_op(StreamId stream, std::string_view name, AsyncStart start,
                           std::span<const OpId> deps) {
  const auto index = static_cast<std::uint32_t>(async_.size());
  const OpId id = add(stream, name, Time::zero(), deps, index);
  async_.push_back(std::move(start));
  return id;
}

OpGraph::Dependents OpGraph::dependents() const {
  // A counting sort of the dependency edges by the op depended on; ops are visited in id order,
  // so each row lists its dependents in the order they were added.
  Dependents out;
  out.begin.assign(ops_.size() + 1, 0);
  for (OpId d : deps_) ++out.begin[d.value + 1];
  for (std::size_t i = 0; i < ops_.size(); ++i) out.begin[i + 1] += out.begin[i];
  out.ops.resize(deps_.size());
  std::vector<std::uint32_t> next(out.begin.begin(), out.begin.end() - 1);
  for (std::uint32_t i = 0; i < ops_.size(); ++i) {
    const Record& r = ops_[i];
    for (std::uint32_t k = 0; k < r.deps_size; ++k)
      out.ops[next[deps_[r.deps_begin + k].value]++] = OpId{i};
  }
  return out;
}

}  // namespace meshsim
