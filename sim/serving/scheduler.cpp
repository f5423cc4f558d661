#include "serving/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace meshsim {

ReplicaScheduler::ReplicaScheduler(SchedulerOptions options, std::int64_t blocks)
    : opt_(options), pool_(blocks, options.block_size), new_token_ratio_(options.ratio.init) {
  watermark_blocks_ =
      static_cast<std::int64_t>(std::floor(options.watermark * static_cast<double>(blocks)));
}

std::int64_t ReplicaScheduler::admission_blocks(const RequestState& r, std::int64_t computed,
                                                std::int64_t held, std::int64_t n) const {
  // Reserve: the whole request (the output length stands for max_tokens, as benchmarks set it).
  const std::int64_t tokens =
      opt_.admission == Admission::reserve ? r.prompt + r.output : computed + n;
  return pool_.blocks_for(tokens) - held;
}

void ReplicaScheduler::take(std::int64_t n) {
  const std::int64_t fresh = std::min(n, pool_.free());
  pool_.allocate(fresh);
  cache_.evict(n - fresh);  // the rest from cached blocks nobody holds, least recent first
}

void ReplicaScheduler::release_all(RequestState& r) {
  pool_.release(r.private_blocks());
  for (const auto b : r.shared) cache_.release(r.prefix_group, b);
  r.shared.clear();
  r.blocks = 0;
}

void ReplicaScheduler::preempt(std::vector<RequestState>& reqs, std::size_t running_index,
                               Batch& b) {
  const auto id = running_[running_index];
  auto& r = reqs[static_cast<std::size_t>(id)];
  ++b.preempted;
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  if (opt_.preemption == Preemption::swap && r.blocks <= opt_.swap_blocks - swap_used_) {
    // Swap: every block it covers (its cached prefix blocks as copies) goes to the host; its
    // computed tokens stay computed.
    r.swapped_blocks = r.blocks;
    swap_used_ += r.blocks;
    b.swapped_out_blocks += r.blocks;
    release_all(r);
    swapped_.push_back(id);
    return;
  }
  // Recompute: drop the cache; the prompt and every token generated so far become one prefill
  // when the request is scheduled again, at the head of the queue (vLLM). Its prefix blocks stay
  // cached while nobody evicts them.
  b.recomputed_tokens += r.computed;
  release_all(r);
  r.computed = 0;
  waiting_.push_front(id);
}

void ReplicaScheduler::add(std::vector<RequestState>& reqs, Batch& b, std::int64_t& budget,
                           std::int32_t id, std::int64_t n) {
  auto& r = reqs[static_cast<std::size_t>(id)];
  BatchEntry e{.request = id, .tokens = n, .context = r.computed, .decode = r.decoding()};
  if (e.decode) {
    // n − 1 speculated tokens on top of the sequence's one: all n positions get logits.
    ++b.shape.decodes;
    b.shape.decode_context += r.computed + n;
    b.shape.speculated += n - 1;
    b.shape.draft_passes = std::max(b.shape.draft_passes, n - 1);
    b.shape.sampled += n;
  } else {
    b.shape.prefill.push_back(PrefillChunk{.tokens = n, .context = r.computed});
    // The sequence samples a token when this iteration computes all its known tokens.
    if (r.computed + n == r.known()) ++b.shape.sampled;
  }
  r.in_flight = true;
  b.entries.push_back(e);
  budget -= n;
}

bool ReplicaScheduler::admissible(std::int64_t blocks_left, std::int64_t expected_tokens) const {
  // An idle replica admits whatever fits now, so that a request whose expected output alone
  // exceeds the cache still runs (and is retracted if it must be).
  if (running_.empty()) expected_tokens = 0;
  return blocks_left * pool_.block_size() - expected_tokens >=
         watermark_blocks_ * pool_.block_size();
}

std::int64_t ReplicaScheduler::ratio_reserve(const RequestState& r) const {
  const auto left = std::clamp<std::int64_t>(r.output - r.generated, 0, opt_.ratio.clip_tokens);
  return static_cast<std::int64_t>(std::ceil(new_token_ratio_ * static_cast<double>(left)));
}

std::int64_t ReplicaScheduler::running_ratio_reserve(const std::vector<RequestState>& reqs) const {
  std::int64_t tokens = 0;
  for (const auto id : running_) tokens += ratio_reserve(reqs[static_cast<std::size_t>(id)]);
  return tokens;
}

void ReplicaScheduler::schedule_running(std::vector<RequestState>& reqs, Batch& b,
                                        std::int64_t& budget, Only only) {
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    const auto id = running_[i];
    auto& r = reqs[static_cast<std::size_t>(id)];
    if (r.in_flight || (only == Only::prefills && r.decoding()) ||
        (only == Only::decodes && !r.decoding())) {
      ++i;
      continue;
    }
    // Whatever fits in the blocks it holds and the free ones: a prefill shrinks its chunk
    // rather than evict others; a sequence that cannot take one more token makes room.
    const auto fits = [&] { return (r.blocks + available()) * pool_.block_size() - r.computed; };
    bool self_preempted = false;
    while (fits() < 1) {
      // Evict from the back: the latest admitted sequence not in flight.
      std::size_t victim = running_.size();
      for (std::size_t j = running_.size(); j-- > 0;)
        if (!reqs[static_cast<std::size_t>(running_[j])].in_flight) {
          victim = j;
          break;
        }
      if (victim == running_.size()) break;  // only in-flight sequences hold blocks: wait
      self_preempted = victim == i;
      preempt(reqs, victim, b);
      if (self_preempted) break;
    }
    if (self_preempted) continue;  // running_[i] is now the next sequence
    if (fits() < 1) {
      ++i;
      continue;
    }
    // A decoding sequence asks for its token plus the drafts it may verify.
    const std::int64_t want =
        r.decoding() && opt_.speculative_tokens > 0
            ? 1 + std::clamp<std::int64_t>(r.output - r.generated - 1, 0, opt_.speculative_tokens)
            : r.pending();
    const std::int64_t n = std::min({want, budget, fits()});
    // Reserved at admission: the blocks held already cover every token.
    const std::int64_t need =
        std::max<std::int64_t>(0, pool_.blocks_for(r.computed + n) - r.blocks);
    take(need);
    r.blocks += need;
    add(reqs, b, budget, id, n);
    ++i;
  }
}

void ReplicaScheduler::admit(std::vector<RequestState>& reqs, Batch& b, std::int64_t& budget) {
  // Swapped-out sequences come back first, oldest first, while their blocks fit above the
  // watermark (vLLM V0's _schedule_swapped), unless this iteration had to preempt.
  while (b.preempted == 0 && budget > 0 && !swapped_.empty() &&
         static_cast<std::int64_t>(running_.size()) < opt_.max_seqs) {
    const auto id = swapped_.front();
    auto& r = reqs[static_cast<std::size_t>(id)];
    const std::int64_t n = std::min(r.pending(), budget);
    const std::int64_t need = std::max(r.swapped_blocks, pool_.blocks_for(r.computed + n));
    if (available() - need < watermark_blocks_) break;
    swapped_.pop_front();
    b.swapped_in_blocks += r.swapped_blocks;
    swap_used_ -= r.swapped_blocks;
    r.swapped_blocks = 0;
    take(need);
    r.blocks = need;
    running_.push_back(id);
    add(reqs, b, budget, id, n);
  }
  // Ratio admission: the free blocks must also cover the expected growth of every running
  // sequence (SGLang's PrefillAdder: rem_total_tokens less ratio × remaining output of each).
  std::int64_t expected_tokens =
      opt_.admission == Admission::ratio && !waiting_.empty() ? running_ratio_reserve(reqs) : 0;
  // Waiting requests, first come first served, unless this iteration had to preempt or
  // swapped-out sequences still wait (vLLM V0 schedules prefills only when none are swapped).
  while (b.preempted == 0 && swapped_.empty() && budget > 0 && !waiting_.empty() &&
         static_cast<std::int64_t>(running_.size()) < opt_.max_seqs) {
    const auto id = waiting_.front();
    auto& r = reqs[static_cast<std::size_t>(id)];
    // Prefix caching: the group's cached leading blocks count as computed. At least one prompt
    // token is always computed, so that the request has logits to sample (vLLM V1 caps a hit at
    // prompt − 1 tokens).
    const bool lookup = opt_.prefix_caching && r.prefix_group >= 0;
    PrefixCache::Match hit;
    if (lookup && r.computed == 0)
      hit = cache_.match(r.prefix_group,
                         std::min(r.prefix_tokens, r.prompt - 1) / pool_.block_size());
    const std::int64_t cached = hit.blocks * pool_.block_size();
    // Admission needs the whole first chunk to fit with the watermark left free (vLLM);
    // admitting a sliver of a prompt into a full cache only feeds preemption.
    const std::int64_t n = std::min(r.pending() - cached, budget);
    const std::int64_t need = admission_blocks(r, cached, hit.blocks, n);
    // Cached blocks nobody held stop being free once this request holds them.
    const std::int64_t expected = opt_.admission == Admission::ratio ? ratio_reserve(r) : 0;
    if (!admissible(available() - hit.idle - need, expected_tokens + expected)) break;
    expected_tokens += expected;
    waiting_.pop_front();
    if (lookup) {
      queried_tokens_ += r.prompt;
      hit_tokens_ += cached;
      if (r.first_cached_tokens < 0) r.first_cached_tokens = cached;
    }
    for (std::int64_t blk = 0; blk < hit.blocks; ++blk) {
      cache_.acquire(r.prefix_group, blk);
      r.shared.push_back(static_cast<std::int32_t>(blk));
    }
    r.computed = cached;
    r.blocks = hit.blocks;
    take(need);
    r.blocks += need;
    running_.push_back(id);
    add(reqs, b, budget, id, n);
  }
}

Batch ReplicaScheduler::form_batch(std::vector<RequestState>& reqs) {
  Batch b;
  std::int64_t budget = opt_.max_batch_tokens;
  const bool ratio = opt_.admission == Admission::ratio;
  if (ratio && running_.empty()) new_token_ratio_ = opt_.ratio.init;  // idle: start over
  if (opt_.mixed_batches) {
    // Running sequences in admission order, then swapped-out ones and new requests.
    schedule_running(reqs, b, budget, Only::any);
    admit(reqs, b, budget);
  } else {
    // Prefills alone whenever any can run (a chunked prompt in progress, then new requests);
    // otherwise the decodes, with no token budget (SGLang's get_next_batch_to_run).
    schedule_running(reqs, b, budget, Only::prefills);
    admit(reqs, b, budget);
    if (b.entries.empty()) {
      std::int64_t unbounded = std::numeric_limits<std::int64_t>::max();
      schedule_running(reqs, b, unbounded, Only::decodes);
    }
  }
  if (ratio) {
    if (b.preempted > 0) {
      // A retraction: the ratio becomes what the sequences still running have decoded so far
      // plus retract_steps each, over what they may decode in all (SGLang's retract_decode).
      std::int64_t decoded = 0, total = 0;
      for (const auto id : running_) {
        const auto& r = reqs[static_cast<std::size_t>(id)];
        decoded += r.generated;
        total += r.output;
      }
      const auto steps = opt_.ratio.retract_steps * static_cast<std::int64_t>(running_.size());
      new_token_ratio_ =
          total > 0
              ? std::min(1.0, static_cast<double>(decoded + steps) / static_cast<double>(total))
              : opt_.ratio.init;
    } else if (b.shape.decodes > 0) {
      const double decay =
          (opt_.ratio.init - opt_.ratio.min) / static_cast<double>(opt_.ratio.decay_steps);
      new_token_ratio_ = std::max(opt_.ratio.min, new_token_ratio_ - decay);
    }
  }
  return b;
}

void ReplicaScheduler::finish(std::vector<RequestState>& reqs, std::int32_t request) {
  auto& r = reqs[static_cast<std::size_t>(request)];
  release_all(r);
  const auto it = std::find(running_.begin(), running_.end(), request);
  if (it != running_.end()) running_.erase(it);
}

void ReplicaScheduler::hand_off(std::int32_t request, std::int64_t blocks, std::int64_t group,
                                const std::vector<std::int32_t>& shared) {
  pool_.release(blocks);
  for (const auto b : shared) cache_.release(group, b);
  const auto it = std::find(running_.begin(), running_.end(), request);
  if (it != running_.end()) running_.erase(it);
}

void ReplicaScheduler::computed(std::vector<RequestState>& reqs, std::int32_t request,
                                std::int64_t before) {
  auto& r = reqs[static_cast<std::size_t>(request)];
  if (!opt_.prefix_caching || r.prefix_group < 0) return;
  const std::int64_t bs = pool_.block_size();
  // Blocks of the shared prefix that became full in this iteration (those before were found in
  // the cache or filled earlier).
  const std::int64_t end = std::min(r.computed, r.prefix_tokens) / bs;
  for (std::int64_t blk = before / bs; blk < end; ++blk)
    if (cache_.insert(r.prefix_group, blk)) r.shared.push_back(static_cast<std::int32_t>(blk));
}

bool ReplicaScheduler::can_adopt(std::int64_t tokens) const {
  return static_cast<std::int64_t>(running_.size()) < opt_.max_seqs &&
         pool_.blocks_for(tokens) <= available();
}

bool ReplicaScheduler::reserve(std::vector<RequestState>& reqs, std::int32_t request,
                               std::int64_t tokens) {
  if (!can_adopt(tokens)) return false;
  auto& r = reqs[static_cast<std::size_t>(request)];
  const auto need = pool_.blocks_for(tokens);
  take(need);
  r.blocks = need;
  return true;
}

bool ReplicaScheduler::has_runnable(const std::vector<RequestState>& reqs) const {
  for (const auto id : running_) {
    const auto& r = reqs[static_cast<std::size_t>(id)];
    if (!r.in_flight && r.pending() > 0 &&
        pool_.blocks_for(r.computed + 1) - r.blocks <= available())
      return true;
  }
  if (!swapped_.empty() && static_cast<std::int64_t>(running_.size()) < opt_.max_seqs) {
    const auto& r = reqs[static_cast<std::size_t>(swapped_.front())];
    return available() - std::max(r.swapped_blocks, pool_.blocks_for(r.computed + 1)) >=
           watermark_blocks_;
  }
  if (!waiting_.empty() && static_cast<std::int64_t>(running_.size()) < opt_.max_seqs) {
    const auto& r = reqs[static_cast<std::size_t>(waiting_.front())];
    const auto n = std::min(r.pending(), opt_.max_batch_tokens);
    const std::int64_t expected =
        opt_.admission == Admission::ratio ? ratio_reserve(r) + running_ratio_reserve(reqs) : 0;
    if (admissible(available() - admission_blocks(r, r.computed, r.blocks, n), expected))
      return true;
  }
  return false;
}

}  // namespace meshsim
