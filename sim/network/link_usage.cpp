#include "network/link_usage.hpp"

#include <algorithm>

namespace meshsim {

void UsageBuilder::add(std::uint32_t link, double weight) {
  if (weight_[link] == 0.0) touched_.push_back(link);
  weight_[link] += weight;
}

void UsageBuilder::add(const std::vector<Path>& paths, double weight) {
  for (const auto& p : paths)
    for (auto e : p.edges) add(e, weight * p.fraction);
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

void UsageBuilder::reset(std::size_t link_count) {
  for (auto e : touched_) weight_[e] = 0.0;
  touched_.clear();
  if (weight_.size() < link_count) weight_.resize(link_count, 0.0);
}

UsageBuilder& scratch_usage_builder(std::size_t link_count) {
  thread_local UsageBuilder builder;
  builder.reset(link_count);
  return builder;
}

FlowLinks usage_of(const std::vector<Path>& paths) {
  std::uint32_t max_link = 0;
  for (const auto& p : paths)
    for (auto e : p.edges) max_link = std::max(max_link, e);
  UsageBuilder b(static_cast<std::size_t>(max_link) + 1);
  b.add(paths);
  return b.take();
}

}  // namespace meshsim
