#include "serving/prefix_cache.hpp"

#include <stdexcept>

namespace meshsim {

PrefixCache::Match PrefixCache::match(std::int64_t group, std::int64_t max_blocks) const {
  Match m;
  for (std::int64_t b = 0; b < max_blocks; ++b) {
    const auto it = entries_.find(key(group, b));
    if (it == entries_.end()) break;
    ++m.blocks;
    if (it->second.holders == 0) ++m.idle;
  }
  return m;
}

void PrefixCache::acquire(std::int64_t group, std::int64_t block) {
  const auto it = entries_.find(key(group, block));
  if (it == entries_.end()) throw std::logic_error("prefix cache: acquired a block not cached");
  auto& e = it->second;
  if (e.holders++ == 0) lru_.erase(e.lru);
}

bool PrefixCache::insert(std::int64_t group, std::int64_t block) {
  const auto [it, added] = entries_.try_emplace(key(group, block));
  if (added) it->second.holders = 1;
  return added;
}

void PrefixCache::release(std::int64_t group, std::int64_t block) {
  const auto it = entries_.find(key(group, block));
  if (it == entries_.end() || it->second.holders <= 0)
    throw std::logic_error("prefix cache: released a block nobody holds");
  auto& e = it->second;
  if (--e.holders == 0) e.lru = lru_.insert(lru_.end(), it->first);
}

void PrefixCache::evict(std::int64_t n) {
  if (n > idle()) throw std::logic_error("prefix cache: evicted more blocks than are idle");
  for (std::int64_t i = 0; i < n; ++i) {
    entries_.erase(lru_.front());
    lru_.pop_front();
  }
}

}  // namespace meshsim
