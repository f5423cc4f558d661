#include "model/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace meshsim {

namespace {

// ln C(n, k).
long double log_choose(std::int64_t n, std::int64_t k) {
  return std::lgamma(static_cast<long double>(n) + 1) -
         std::lgamma(static_cast<long double>(k) + 1) -
         std::lgamma(static_cast<long double>(n - k) + 1);
}

// C(n − r, k) / C(n, k): the chance that a uniform k-subset of n items avoids r given ones.
long double avoid(std::int64_t n, std::int64_t r, std::int64_t k) {
  if (r <= 0) return 1.0L;
  if (n - r < k) return 0.0L;
  return std::exp(log_choose(n - r, k) - log_choose(n, k));
}

// The node's experts in each group.
std::vector<std::int64_t> overlaps(const MoeSpec& moe, const std::vector<ExpertRange>& experts) {
  const std::int64_t G = std::max<std::int64_t>(moe.groups, 1), s = moe.experts / G;
  std::vector<std::int64_t> x(static_cast<std::size_t>(G), 0);
  for (const auto& [first, end] : experts) {
    if (first < 0 || end > moe.experts || first > end)
      throw std::invalid_argument("moe routing: expert range");
    for (std::int64_t g = first / s; g < G && g * s < end; ++g)
      x[static_cast<std::size_t>(g)] += std::min(end, (g + 1) * s) - std::max(first, g * s);
  }
  return x;
}

// Chosen groups each with at least one copy: over every choice of g groups and every split of
// the k copies among them (d_i ≥ 1 each), Σ Π C(s − x_i, d_i) counts the splits missing the node
// and Σ Π C(s, d_i) all of them; both sums have positive terms only. k ≤ 64 keeps the counts in a
// long double (C(2^24, 64) ≈ 1e372).
long double miss_conditioned(const std::vector<std::int64_t>& x, std::int64_t g, std::int64_t s,
                             std::int64_t k) {
  using Table = std::vector<std::vector<long double>>;  // [chosen][copies]
  const auto fresh = [&] {
    return Table(static_cast<std::size_t>(g + 1),
                 std::vector<long double>(static_cast<std::size_t>(k + 1), 0.0L));
  };
  // C(n, j) for j = 0..k (0 past n).
  const auto binomials = [&](std::int64_t n) {
    std::vector<long double> c(static_cast<std::size_t>(k + 1), 0.0L);
    for (std::int64_t j = 0; j <= std::min(n, k); ++j)
      c[static_cast<std::size_t>(j)] = std::exp(log_choose(n, j));
    return c;
  };
  const auto whole = binomials(s);
  Table miss = fresh(), all = fresh();
  miss[0][0] = all[0][0] = 1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto rest = binomials(s - x[i]);
    for (std::int64_t c = std::min<std::int64_t>(static_cast<std::int64_t>(i), g - 1); c >= 0; --c)
      for (std::int64_t d = k - 1; d >= 0; --d) {
        const auto cu = static_cast<std::size_t>(c), du = static_cast<std::size_t>(d);
        const long double m = miss[cu][du], a = all[cu][du];
        if (m == 0 && a == 0) continue;
        for (std::int64_t j = 1; d + j <= k; ++j) {
          const auto to = static_cast<std::size_t>(d + j), ju = static_cast<std::size_t>(j);
          all[cu + 1][to] += a * whole[ju];
          miss[cu + 1][to] += m * rest[ju];
        }
      }
  }
  const long double total = all[static_cast<std::size_t>(g)][static_cast<std::size_t>(k)];
  return total > 0 ? miss[static_cast<std::size_t>(g)][static_cast<std::size_t>(k)] / total : 1;
}

// Copies uniform over the chosen groups' g·s experts: over every choice of g groups, the chance
// of avoiding the node's R = Σ x_i experts among them, averaged.
long double miss_uniform(const std::vector<std::int64_t>& x, std::int64_t g, std::int64_t s,
                         std::int64_t k) {
  // ways[c]: number of choices of c groups so far by the node's experts they hold.
  std::vector<std::map<std::int64_t, long double>> ways(static_cast<std::size_t>(g + 1));
  ways[0][0] = 1;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::int64_t c = std::min<std::int64_t>(static_cast<std::int64_t>(i), g - 1); c >= 0; --c)
      for (const auto& [R, w] : ways[static_cast<std::size_t>(c)])
        ways[static_cast<std::size_t>(c + 1)][R + x[i]] += w;
  long double miss = 0, choices = 0;
  for (const auto& [R, w] : ways[static_cast<std::size_t>(g)]) {
    miss += w * avoid(g * s, R, k);
    choices += w;
  }
  return miss / choices;
}

// The routing the loader admits (model_loader.cpp): anything else is a caller's error.
void check(const MoeSpec& moe) {
  const std::int64_t G = std::max<std::int64_t>(moe.groups, 1);
  if (moe.experts <= 0 || moe.top_k <= 0 || moe.top_k > moe.experts || moe.experts % G != 0 ||
      G > 64)
    throw std::invalid_argument("moe routing: experts, top-k or groups");
}

// The chance a node holding `x[i]` experts of group i is hit. It depends on the x only up to
// their order (the groups are chosen uniformly).
double hit_probability(const MoeSpec& moe, const std::vector<std::int64_t>& x) {
  const std::int64_t E = moe.experts, k = moe.top_k, G = std::max<std::int64_t>(moe.groups, 1);
  const std::int64_t g = std::clamp<std::int64_t>(moe.group_limit, 1, G), s = E / G;
  std::int64_t held = 0;
  for (auto v : x) held += v;
  long double miss = 0;
  if (g == G)  // no limit: a uniform k-subset of all E experts
    miss = avoid(E, held, k);
  else if (k >= g && k <= 64)
    miss = miss_conditioned(x, g, s, k);
  else
    miss = miss_uniform(x, g, s, k);
  return static_cast<double>(std::clamp(1.0L - miss, 0.0L, 1.0L));
}

}  // namespace

double node_hit_probability(const MoeSpec& moe, const std::vector<ExpertRange>& experts) {
  check(moe);
  return hit_probability(moe, overlaps(moe, experts));
}

double dedup_network_share(const MoeSpec& moe, const NodeExperts& nodes) {
  check(moe);
  if (nodes.size() < 2) return 1.0;
  const double E = static_cast<double>(moe.experts), k = static_cast<double>(moe.top_k);
  // Nodes alike (the same experts per group, in any order) are worked out once.
  std::map<std::vector<std::int64_t>, double> by_profile;
  std::vector<double> hit, held;
  double all = 0;
  for (const auto& n : nodes) {
    auto profile = overlaps(moe, n);
    std::int64_t e = 0;
    for (auto v : profile) e += v;
    std::sort(profile.begin(), profile.end());
    auto it = by_profile.find(profile);
    if (it == by_profile.end())
      it = by_profile.emplace(profile, hit_probability(moe, profile)).first;
    hit.push_back(it->second);
    held.push_back(static_cast<double>(e));
    all += it->second;
  }
  double dedup = 0, plain = 0;
  for (std::size_t a = 0; a < nodes.size(); ++a) {
    dedup += held[a] * (all - hit[a]);
    plain += held[a] * k * (E - held[a]) / E;
  }
  return plain > 0 ? std::min(1.0, dedup / plain) : 1.0;
}

}  // namespace meshsim
