#include "engine/longest_chain.hpp"

#include <algorithm>
#include <optional>

namespace meshsim {
namespace {

// Each op's predecessor on its stream, for ops up to `to`.
std::vector<std::optional<std::uint32_t>> stream_predecessors(const OpGraph& g, OpId to) {
  std::vector<std::optional<std::uint32_t>> prev(to.value + 1);
  std::vector<std::optional<std::uint32_t>> last(g.stream_count());
  for (std::uint32_t i = 0; i <= to.value; ++i) {
    auto& l = last[g.op(OpId{i}).stream.value];
    prev[i] = l;
    l = i;
  }
  return prev;
}

bool in_range(const OpGraph& g, OpId from, OpId to) {
  return from.value <= to.value && to.value < g.op_count();
}

}  // namespace

std::vector<OpId> chain_ops(const OpGraph& g, OpId from, OpId to) {
  if (!in_range(g, from, to)) return {};
  const auto prev = stream_predecessors(g, to);
  const auto n = static_cast<std::size_t>(to.value - from.value) + 1;
  // Forward from `from`, then back from `to` over the ops reached.
  std::vector<char> reached(n, 0), needed(n, 0);
  auto at = [&](std::uint32_t i) { return static_cast<std::size_t>(i - from.value); };
  reached[0] = 1;
  for (std::uint32_t i = from.value + 1; i <= to.value; ++i) {
    bool r = prev[i] && *prev[i] >= from.value && reached[at(*prev[i])];
    for (auto d : g.op(OpId{i}).deps) r = r || (d.value >= from.value && reached[at(d.value)]);
    reached[at(i)] = r;
  }
  if (!reached[at(to.value)]) return {};
  needed[at(to.value)] = 1;
  for (std::uint32_t i = to.value + 1; i-- > from.value;) {
    if (!needed[at(i)] || !reached[at(i)]) continue;
    if (prev[i] && *prev[i] >= from.value) needed[at(*prev[i])] = 1;
    for (auto d : g.op(OpId{i}).deps)
      if (d.value >= from.value) needed[at(d.value)] = 1;
  }
  std::vector<OpId> out;
  for (std::uint32_t i = from.value; i <= to.value; ++i)
    if (needed[at(i)] && reached[at(i)]) out.push_back(OpId{i});
  return out;
}

Time longest_chain(const OpGraph& g, OpId from, OpId to, std::span<const Time> duration) {
  if (!in_range(g, from, to)) return Time::zero();
  const auto prev = stream_predecessors(g, to);
  // end[i]: the latest end of a chain from `from`'s start through op i; none when no chain
  // reaches it.
  std::vector<std::optional<Time>> end(to.value + 1);
  for (std::uint32_t i = from.value; i <= to.value; ++i) {
    std::optional<Time> start;
    if (i == from.value) {
      start = Time::zero();
    } else {
      auto after = [&](std::uint32_t p) {
        if (end[p]) start = std::max(start.value_or(Time::zero()), *end[p]);
      };
      for (auto d : g.op(OpId{i}).deps) after(d.value);
      if (prev[i]) after(*prev[i]);
    }
    const Time d = i < duration.size() ? duration[i] : g.op(OpId{i}).duration;
    if (start) end[i] = *start + d;
  }
  return end[to.value].value_or(Time::zero());
}

}  // namespace meshsim
