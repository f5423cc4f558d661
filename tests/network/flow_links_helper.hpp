#pragma once
// FlowLinks with weight 1 on each listed link, for solver and network tests.
#include <initializer_list>

#include "network/max_min_fair.hpp"

namespace meshsim::test {
inline FlowLinks on_links(std::initializer_list<std::uint32_t> links) {
  FlowLinks f;
  for (auto l : links) f.push_back(LinkUse{l, 1.0});
  return f;
}
}  // namespace meshsim::test
