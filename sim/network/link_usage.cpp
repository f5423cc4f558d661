#include "network/link_usage.hpp"

#include <algorithm>

namespace meshsim {

void add_usage(FlowLinks& usage, const std::vector<Path>& paths, double weight) {
  for (const auto& p : paths)
    for (auto e : p.edges) usage.push_back(LinkUse{e, weight * p.fraction});
}

void normalize(FlowLinks& usage) {
  std::sort(usage.begin(), usage.end(),
            [](const LinkUse& a, const LinkUse& b) { return a.link < b.link; });
  std::size_t out = 0;
  for (std::size_t i = 0; i < usage.size(); ++i) {
    if (out > 0 && usage[out - 1].link == usage[i].link)
      usage[out - 1].weight += usage[i].weight;
    else
      usage[out++] = usage[i];
  }
  usage.resize(out);
}

FlowLinks usage_of(const std::vector<Path>& paths) {
  FlowLinks u;
  add_usage(u, paths);
  normalize(u);
  return u;
}

void UsageBuilder::add(const std::vector<Path>& paths, double weight) {
  for (const auto& p : paths)
    for (auto e : p.edges) {
      if (weight_[e] == 0.0) touched_.push_back(e);
      weight_[e] += weight * p.fraction;
    }
}

FlowLinks UsageBuilder::take() {
  FlowLinks out;
  out.reserve(touched_.size());
  for (auto e : touched_) {
    out.push_back(LinkUse{e, weight_[e]});
    weight_[e] = 0.0;
  }
  touched_.clear();
  return out;
}

}  // namespace meshsim
