#include "engine/op_graph.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace meshsim;

namespace {
std::vector<std::uint32_t> ids(std::span<const OpId> ops) {
  std::vector<std::uint32_t> out;
  for (auto o : ops) out.push_back(o.value);
  return out;
}
}  // namespace

TEST_CASE("an op reads back its name, stream, duration and dependencies from the flat arrays") {
  OpGraph g;
  const auto s = g.add_stream(3, StreamKind::compute);
  const auto t = g.add_stream(3, StreamKind::dp);
  const auto a = g.add_op(s, "F0.L12.attention.qkv", Time::ns(5));
  const auto b = g.add_op(t, "grads.c0.L12", Time::ns(7), {a});
  std::vector<OpId> deps{a, b};
  const auto c = g.add_async_op(
      s, "c", [](OpId, OpDone) {}, deps);
  deps.clear();  // the graph keeps its own copy
  // Names longer than a small-string buffer and ops added after them leave earlier views intact.
  for (int i = 0; i < 100; ++i) g.add_op(s, "filler." + std::to_string(i), Time::ns(1));
  CHECK(g.op(a).name == "F0.L12.attention.qkv");
  CHECK(g.op(b).name == "grads.c0.L12");
  CHECK(g.op(b).stream == t);
  CHECK(g.op(b).duration == Time::ns(7));
  CHECK(ids(g.op(a).deps).empty());
  CHECK(ids(g.op(b).deps) == std::vector<std::uint32_t>{0});
  CHECK(ids(g.op(c).deps) == std::vector<std::uint32_t>{0, 1});
  CHECK(g.op(a).start == nullptr);
  CHECK(g.op(c).start != nullptr);
  CHECK(g.op(OpId{102}).name == "filler.99");
  CHECK(g.stream(s).ops.size() == 102);
}

TEST_CASE("dependents are listed per op in the order they were added") {
  // 0 <- 1, 0 <- 2, 1 <- 3, 0 <- 3, 2 <- 4: op 0's dependents are 1, 2, 3; op 1's 3; op 2's 4.
  OpGraph g;
  const auto s = g.add_stream(0, StreamKind::compute);
  const auto o0 = g.add_op(s, "0", Time::ns(1));
  const auto o1 = g.add_op(s, "1", Time::ns(1), {o0});
  const auto o2 = g.add_op(s, "2", Time::ns(1), {o0});
  g.add_op(s, "3", Time::ns(1), {o1, o0});
  g.add_op(s, "4", Time::ns(1), {o2});
  const auto d = g.dependents();
  REQUIRE(d.begin == std::vector<std::uint32_t>{0, 3, 4, 5, 5, 5});
  CHECK(ids(d.ops) == std::vector<std::uint32_t>{1, 2, 3, 3, 4});
}
