#include "model/moe_routing.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "core/error.hpp"
#include "model/model_loader.hpp"
#include "test_paths.hpp"

using namespace meshsim;

namespace {

MoeSpec moe(std::int64_t experts, std::int64_t top_k, std::int64_t groups = 1,
            std::int64_t limit = 1) {
  MoeSpec m;
  m.experts = experts;
  m.top_k = top_k;
  m.groups = groups;
  m.group_limit = limit;
  return m;
}

// `nodes` nodes holding consecutive equal blocks of the experts.
NodeExperts blocks(std::int64_t experts, std::int64_t nodes) {
  NodeExperts out;
  const auto per = experts / nodes;
  for (std::int64_t n = 0; n < nodes; ++n) out.push_back({{n * per, (n + 1) * per}});
  return out;
}

}  // namespace

TEST_CASE("moe routing: without a group limit a node is hit unless all copies miss it") {
  // 8 experts, top-2, a node of 4: 1 − C(4, 2)/C(8, 2) = 1 − 6/28.
  CHECK(node_hit_probability(moe(8, 2), {{0, 4}}) == doctest::Approx(22.0 / 28.0));
  // Two nodes: each sends the other 22/28 of a token where a plain all-to-all sends
  // 2 copies × 4/8 of them: share (22/28) / 1.
  CHECK(dedup_network_share(moe(8, 2), blocks(8, 2)) == doctest::Approx(22.0 / 28.0));
  // One expert per node: the copies go to distinct nodes, nothing to deduplicate.
  CHECK(dedup_network_share(moe(8, 2), blocks(8, 8)) == doctest::Approx(1.0));
  // One node: nothing crosses the network.
  CHECK(dedup_network_share(moe(8, 2), blocks(8, 1)) == 1.0);
}

TEST_CASE("moe routing: a chosen group receives a copy") {
  // 4 groups of 2, top-2 from 2 groups, a group per node: each chosen group gets exactly one
  // copy, so a node is hit iff its group is chosen (2/4), and a token reaches 2 = top_k nodes.
  CHECK(node_hit_probability(moe(8, 2, 4, 2), {{2, 4}}) == doctest::Approx(0.5));
  CHECK(dedup_network_share(moe(8, 2, 4, 2), blocks(8, 4)) == doctest::Approx(1.0));
  // DeepSeek-V3 on EP 64 over 8 nodes, a group (32 experts) per node, 4 groups a token: half
  // the nodes are hit, 3.5 remote where a plain all-to-all sends 8 × 7/8 = 7 copies.
  CHECK(dedup_network_share(moe(256, 8, 8, 4), blocks(256, 8)) == doctest::Approx(0.5));
  // A group over two nodes: 2 groups of 4, top-2 from 1 group, nodes of 2 experts. The group is
  // chosen half the time and then misses the node with C(2, 2)/C(4, 2) = 1/6: P = 5/12. Each
  // node sends 3 × 5/12 = 1.25 where a plain all-to-all sends 2 × 6/8 = 1.5.
  CHECK(node_hit_probability(moe(8, 2, 2, 1), {{0, 2}}) == doctest::Approx(5.0 / 12.0));
  CHECK(dedup_network_share(moe(8, 2, 2, 1), blocks(8, 4)) == doctest::Approx(1.25 / 1.5));
  // top_k below the group limit: uniform over the chosen groups' experts. 4 groups of 2, 1 copy
  // from 2 groups, a node of one group: chosen 1/2, then the copy is on it 2/4 → 1/4.
  CHECK(node_hit_probability(moe(8, 1, 4, 2), {{0, 2}}) == doctest::Approx(0.25));
}

TEST_CASE("moe routing: a node of uneven groups sums over which of its groups are chosen") {
  // 4 groups of 2, top-2 from 2 groups; the node holds group 0 whole and one expert of group 1.
  // Chosen sets (6, equally likely), conditioned on each chosen group getting its one copy:
  // {0, x}: hit; {1, x≠0}: the group-1 copy lands on the node's expert 1/2; others: miss.
  // P = 3/6 + 2/6 × 1/2 = 2/3.
  CHECK(node_hit_probability(moe(8, 2, 4, 2), {{0, 2}, {2, 3}}) == doctest::Approx(2.0 / 3.0));
}

TEST_CASE("moe routing: past 64 copies, or more groups than copies, the copies are uniform") {
  // 256 experts in 2 groups of 128, top-100 from 1 group; the node holds group 0 whole: hit iff
  // group 0 is chosen (every copy then lands in it), 1/2.
  CHECK(node_hit_probability(moe(256, 100, 2, 1), {{0, 128}}) == doctest::Approx(0.5));
  // Half of group 0 only: chosen 1/2, then the 100 copies of 128 miss its 64 with
  // C(64, 100)/C(128, 100) = 0: still 1/2.
  CHECK(node_hit_probability(moe(256, 100, 2, 1), {{0, 64}}) == doctest::Approx(0.5));
  // 2^24 experts, top-8, a node of 2^20: 1 − C(2^24 − 2^20, 8)/C(2^24, 8) ≈ 1 − (15/16)^8.
  const double expected = 1 - std::pow(15.0 / 16.0, 8);
  CHECK(node_hit_probability(moe(std::int64_t{1} << 24, 8), {{0, std::int64_t{1} << 20}}) ==
        doctest::Approx(expected).epsilon(1e-5));
}

TEST_CASE("moe routing: DeepSeek-V3's bundled config on EP 64 over 8 nodes halves the bytes") {
  // Its own n_group 8 / topk_group 4 (not a hand-built spec): a group per node, 4 nodes a token.
  const auto m = load_model(test::source_path("workloads/models/deepseek-v3.json"));
  REQUIRE(m.moe);
  CHECK(dedup_network_share(*m.moe, blocks(256, 8)) == doctest::Approx(0.5));
  // A node's chance does not depend on which groups it holds.
  CHECK(node_hit_probability(*m.moe, {{0, 32}}) == node_hit_probability(*m.moe, {{224, 256}}));
}
