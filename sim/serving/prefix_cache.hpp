#pragma once
// Automatic prefix caching (vLLM's APC; SGLang's RadixAttention shares the same blocks): a full
// KV block is identified by the hash of every token up to its end, so requests that start with
// the same tokens reuse the blocks already computed, and blocks no sequence holds stay cached
// until a new allocation evicts the least recently released one.
//
// meshsim knows which requests share a prefix from the traffic (a prefix group and its length,
// traffic.hpp), so a block of a shared prefix is the key (group, block index): the same index in
// the same group covers the same tokens. Assumption (README): only the declared shared prefix is
// hashed; a request's own blocks are not re-found after its preemption, which vLLM V1 (hashing
// every full block) would do.
#include <cstdint>
#include <list>
#include <unordered_map>

namespace meshsim {

class PrefixCache {
 public:
  // The leading blocks of `group` that are cached, at most `max_blocks`, and how many of those
  // no sequence holds (taking them removes them from the evictable set).
  struct Match {
    std::int64_t blocks = 0, idle = 0;
  };
  Match match(std::int64_t group, std::int64_t max_blocks) const;
  // A sequence starts to use cached block `block` of `group` (it must be cached).
  void acquire(std::int64_t group, std::int64_t block);
  // A block a sequence just filled: cached with that sequence as its holder, unless the same
  // block is cached already (another sequence computed it first; this copy stays private, as in
  // vLLM V1). Returns whether it was added.
  bool insert(std::int64_t group, std::int64_t block);
  // A holder lets go; the last one makes the block evictable (most recently used).
  void release(std::int64_t group, std::int64_t block);
  // Removes the `n` least recently released idle blocks (their memory is reused).
  void evict(std::int64_t n);

  std::int64_t size() const { return static_cast<std::int64_t>(entries_.size()); }
  std::int64_t idle() const { return static_cast<std::int64_t>(lru_.size()); }

 private:
  // group < 2^39 (traffic limits groups to 2^20) and block < 2^24 (prefixes ≤ 2^24 tokens).
  static std::uint64_t key(std::int64_t group, std::int64_t block) {
    return (static_cast<std::uint64_t>(group) << 24) | static_cast<std::uint64_t>(block);
  }
  struct Entry {
    std::int64_t holders = 0;
    std::list<std::uint64_t>::iterator lru;  // valid while holders == 0
  };
  std::unordered_map<std::uint64_t, Entry> entries_;
  std::list<std::uint64_t> lru_;  // idle blocks, least recently released first
};

}  // namespace meshsim
