#include "serving/prefix_cache.hpp"

#include <algorithm>
#include <stdexcept>

namespace meshsim {

std::int32_t PrefixCache::find(std::int64_t group, std::int64_t block) const {
  const auto it = groups_.find(group);
  if (it == groups_.end() || block >= static_cast<std::int64_t>(it->second.size())) return kNone;
  return it->second[static_cast<std::size_t>(block)];
}

void PrefixCache::unlink(std::int32_t slot) {
  auto& s = slots_[static_cast<std::size_t>(slot)];
  (s.prev == kNone ? head_ : slots_[static_cast<std::size_t>(s.prev)].next) = s.next;
  (s.next == kNone ? tail_ : slots_[static_cast<std::size_t>(s.next)].prev) = s.prev;
  s.prev = s.next = kNone;
  --idle_;
}

void PrefixCache::append(std::int32_t slot) {
  auto& s = slots_[static_cast<std::size_t>(slot)];
  s.prev = tail_;
  s.next = kNone;
  (tail_ == kNone ? head_ : slots_[static_cast<std::size_t>(tail_)].next) = slot;
  tail_ = slot;
  ++idle_;
}

PrefixCache::Match PrefixCache::match(std::int64_t group, std::int64_t max_blocks) const {
  Match m;
  const auto it = groups_.find(group);
  if (it == groups_.end()) return m;
  const auto& blocks = it->second;
  const auto n = std::min<std::int64_t>(max_blocks, static_cast<std::int64_t>(blocks.size()));
  for (std::int64_t b = 0; b < n; ++b) {
    const auto slot = blocks[static_cast<std::size_t>(b)];
    if (slot == kNone) break;
    ++m.blocks;
    if (slots_[static_cast<std::size_t>(slot)].holders == 0) ++m.idle;
  }
  return m;
}

void PrefixCache::acquire(std::int64_t group, std::int64_t block) {
  const auto slot = find(group, block);
  if (slot == kNone) throw std::logic_error("prefix cache: acquired a block not cached");
  if (slots_[static_cast<std::size_t>(slot)].holders++ == 0) unlink(slot);
}

bool PrefixCache::insert(std::int64_t group, std::int64_t block) {
  auto& blocks = groups_[group];
  if (block >= static_cast<std::int64_t>(blocks.size()))
    blocks.resize(static_cast<std::size_t>(block) + 1, kNone);
  auto& at = blocks[static_cast<std::size_t>(block)];
  if (at != kNone) return false;
  if (free_slots_.empty()) {
    at = static_cast<std::int32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    at = free_slots_.back();
    free_slots_.pop_back();
  }
  slots_[static_cast<std::size_t>(at)] = Slot{.group = group, .block = block, .holders = 1};
  ++size_;
  return true;
}

void PrefixCache::release(std::int64_t group, std::int64_t block) {
  const auto slot = find(group, block);
  if (slot == kNone || slots_[static_cast<std::size_t>(slot)].holders <= 0)
    throw std::logic_error("prefix cache: released a block nobody holds");
  if (--slots_[static_cast<std::size_t>(slot)].holders == 0) append(slot);
}

void PrefixCache::evict(std::int64_t n) {
  if (n > idle()) throw std::logic_error("prefix cache: evicted more blocks than are idle");
  for (std::int64_t i = 0; i < n; ++i) {
    const auto slot = head_;
    unlink(slot);
    const auto& s = slots_[static_cast<std::size_t>(slot)];
    groups_[s.group][static_cast<std::size_t>(s.block)] = kNone;
    free_slots_.push_back(slot);
    --size_;
  }
}

}  // namespace meshsim
