#pragma once
// The paged KV cache of one replica (vLLM's PagedAttention, Kwon et al. 2023): fixed-size
// blocks of `block_size` tokens, allocated to a sequence as it grows and freed when it ends or
// is preempted. Counts only; which physical block is which does not change any time.
#include <cstdint>
#include <stdexcept>

namespace meshsim {

class BlockPool {
 public:
  BlockPool(std::int64_t blocks, std::int64_t block_size)
      : total_(blocks), free_(blocks), block_size_(block_size) {}
  std::int64_t total() const { return total_; }
  std::int64_t free() const { return free_; }
  std::int64_t used() const { return total_ - free_; }
  std::int64_t block_size() const { return block_size_; }
  // Blocks a sequence of `tokens` cached tokens occupies.
  std::int64_t blocks_for(std::int64_t tokens) const {
    return (tokens + block_size_ - 1) / block_size_;
  }
  void allocate(std::int64_t n) {
    if (n < 0 || n > free_) throw std::logic_error("KV block pool over-allocated");
    free_ -= n;
  }
  void release(std::int64_t n) {
    if (n < 0 || free_ + n > total_) throw std::logic_error("KV block pool over-released");
    free_ += n;
  }

 private:
  std::int64_t total_, free_, block_size_;
};

}  // namespace meshsim
