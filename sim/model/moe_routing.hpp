#pragma once
// Where a token's routed expert copies go, under uniform routing: what an expert-parallel
// dispatcher that sends a token to each node once (DeepEP) moves over the network.
#include <cstdint>
#include <utility>
#include <vector>

#include "model/model_spec.hpp"

namespace meshsim {

// Experts [first, end) of one EP rank; a node holds the ranges of its ranks.
using ExpertRange = std::pair<std::int64_t, std::int64_t>;
using NodeExperts = std::vector<std::vector<ExpertRange>>;

// Probability that a node holding `experts` receives at least one of a token's top_k copies.
// Assumption (named, README): routing is uniform. Without a group limit the copies are a
// uniform top_k-subset of the experts. With one (MoeSpec::groups / group_limit) the token's
// groups are a uniform group_limit-subset of the groups and its copies a uniform top_k-subset
// of their experts with every chosen group receiving at least one: DeepSeek-V3 ranks groups by
// the sum of their two best affinities (§2.1.2), so a chosen group holds one of the token's best
// experts. When top_k < group_limit no group can be sure of one, and past 64 copies the count is
// not worked out; there the copies are uniform over the chosen groups' experts.
double node_hit_probability(const MoeSpec& moe, const std::vector<ExpertRange>& experts);

// Bytes a deduplicating dispatcher sends between nodes, as a fraction of what a plain
// all-to-all of every copy sends between them, over all source nodes (each node sends from its
// experts' share of the EP ranks): Σ_a e_a·Σ_{b≠a} P(b hit) / Σ_a e_a·top_k·(E − e_a)/E.
// 1 on one node (nothing crosses the network).
double dedup_network_share(const MoeSpec& moe, const NodeExperts& nodes);

}  // namespace meshsim
