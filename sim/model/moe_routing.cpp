#include "model/moe_routing.hpp"

#include <algorithm>
#include <stdexcept>

namespace meshsim {

namespace {

// C(n − r, k) / C(n, k): the chance that a uniform k-subset of n items avoids r given ones.
long double avoid(std::int64_t n, std::int64_t r, std::int64_t k) {
  if (n - r < k) return 0.0L;
  long double p = 1.0L;
  for (std::int64_t i = 0; i < k; ++i)
    p *= static_cast<long double>(n - r - i) / static_cast<long double>(n - i);
  return p;
}

}  // namespace

double node_hit_probability(const MoeSpec& moe, const std::vector<std::int64_t>& experts_on_node) {
  const std::int64_t E = moe.experts, k = moe.top_k, G = std::max<std::int64_t>(moe.groups, 1);
  const std::int64_t g = std::clamp<std::int64_t>(moe.group_limit, 1, G);
  if (E <= 0 || k <= 0 || E % G != 0) throw std::invalid_argument("node_hit_probability: experts");
  const std::int64_t s = E / G;
  std::vector<std::int64_t> overlap(static_cast<std::size_t>(G), 0);  // node's experts per group
  for (auto e : experts_on_node) {
    if (e < 0 || e >= E) throw std::invalid_argument("node_hit_probability: expert index");
    ++overlap[static_cast<std::size_t>(e / s)];
  }
  const std::int64_t pool = g * s;  // the chosen groups' experts
  const bool conditioned = g < G && k >= g;
  // Over every choice of g groups and, conditioned, every subset J of them emptied by
  // inclusion–exclusion: the experts the token's copies must avoid, R = the node's experts in
  // the chosen groups outside J plus the whole groups in J, weighted (−1)^|J|.
  // dp[c][R]: signed count of (chosen, J) with c groups chosen and R experts avoided.
  std::vector<std::vector<long double>> dp(
      static_cast<std::size_t>(g + 1),
      std::vector<long double>(static_cast<std::size_t>(pool + 1), 0));
  dp[0][0] = 1;
  for (std::int64_t i = 0; i < G; ++i) {
    const auto x = overlap[static_cast<std::size_t>(i)];
    for (std::int64_t c = std::min(i, g - 1); c >= 0; --c)
      for (std::int64_t R = pool; R >= 0; --R) {
        const long double w = dp[static_cast<std::size_t>(c)][static_cast<std::size_t>(R)];
        if (w == 0) continue;
        auto& next = dp[static_cast<std::size_t>(c + 1)];
        if (R + x <= pool) next[static_cast<std::size_t>(R + x)] += w;
        if (conditioned && R + s <= pool) next[static_cast<std::size_t>(R + s)] -= w;
      }
  }
  long double miss = 0;
  for (std::int64_t R = 0; R <= pool; ++R)
    miss += dp[static_cast<std::size_t>(g)][static_cast<std::size_t>(R)] * avoid(pool, R, k);
  // Divide by the number of group choices, C(G, g), and the chance every chosen group gets one.
  long double choices = 1;
  for (std::int64_t i = 0; i < g; ++i)
    choices = choices * static_cast<long double>(G - i) / static_cast<long double>(i + 1);
  long double all_chosen_hit = 1;
  if (conditioned) {
    all_chosen_hit = 0;
    long double binom = 1;  // C(g, j)
    for (std::int64_t j = 0; j <= g; ++j) {
      all_chosen_hit += (j % 2 ? -1.0L : 1.0L) * binom * avoid(pool, j * s, k);
      binom = binom * static_cast<long double>(g - j) / static_cast<long double>(j + 1);
    }
  }
  const long double p = 1.0L - miss / (choices * all_chosen_hit);
  return static_cast<double>(std::clamp(p, 0.0L, 1.0L));
}

double dedup_network_share(const MoeSpec& moe, const NodeExperts& nodes) {
  if (nodes.size() < 2) return 1.0;
  const double E = static_cast<double>(moe.experts), k = static_cast<double>(moe.top_k);
  std::vector<double> hit;
  double all = 0;
  for (const auto& n : nodes) {
    hit.push_back(node_hit_probability(moe, n));
    all += hit.back();
  }
  double dedup = 0, plain = 0;
  for (std::size_t a = 0; a < nodes.size(); ++a) {
    const double e = static_cast<double>(nodes[a].size());
    dedup += e * (all - hit[a]);
    plain += e * k * (E - e) / E;
  }
  return plain > 0 ? std::min(1.0, dedup / plain) : 1.0;
}

}  // namespace meshsim
