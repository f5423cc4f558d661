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
#include <unordered_map>
#include <vector>

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

  std::int64_t size() const { return size_; }
  std::int64_t idle() const { return idle_; }

 private:
  // Blocks live in a slot array with an index-linked LRU list of the idle ones, and each group
  // maps its block indices to slots: with one-token pages (SGLang) a prefix is thousands of
  // blocks, and a node-based list and map per block cost more than the rest of the simulation.
  static constexpr std::int32_t kNone = -1;
  struct Slot {
    std::int64_t group = 0, block = 0, holders = 0;
    std::int32_t prev = kNone, next = kNone;  // in the idle list while holders == 0
  };
  // The slot of `group`'s block `block`, or kNone.
  std::int32_t find(std::int64_t group, std::int64_t block) const;
  void unlink(std::int32_t slot);
  void append(std::int32_t slot);  // as the most recently released idle block

  std::unordered_map<std::int64_t, std::vector<std::int32_t>> groups_;
  std::vector<Slot> slots_;
  std::vector<std::int32_t> free_slots_;
  std::int32_t head_ = kNone, tail_ = kNone;  // least and most recently released idle blocks
  std::int64_t size_ = 0, idle_ = 0;
};

}  // namespace meshsim
