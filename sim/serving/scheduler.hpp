#pragma once
// Iteration-level scheduling of one replica (Orca, Yu et al. 2022; vLLM's scheduler with
// chunked prefill as in Sarathi-Serve, Agrawal et al. 2024): every iteration takes the running
// sequences first (one token for a decode, the next chunk for an unfinished prefill, shrunk to
// the free blocks), preempts the most recently admitted sequences by recompute when a sequence
// cannot take one more token, then admits waiting requests first-come-first-served while the
// token budget, the sequence limit and the free blocks (above the watermark) allow. With pipeline
// parallelism a sequence belongs to at most one batch in flight.
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "core/units.hpp"
#include "serving/kv_cache.hpp"
#include "serving/prefix_cache.hpp"
#include "serving/step_cost.hpp"

namespace meshsim {

// Defaults are vLLM's (v0.6 / V1 engine arguments): max_num_batched_tokens 8192 with chunked
// prefill, max_num_seqs 256, block_size 16, gpu_memory_utilization 0.9, and the V0 block
// manager's admission watermark of 1 % of the blocks.
// Where the KV budget comes from (serving_sim kv_capacity): `fraction` of the whole HBM minus
// the rest of the memory (vLLM's gpu_memory_utilization), or `fraction` of the memory left after
// it (TensorRT-LLM's free_gpu_memory_fraction).
// A third: `fraction` of the whole HBM minus the weights alone (SGLang's mem_fraction_static: the
// weights and the KV pool are the static part; activations and graphs live in the rest).
enum class KvBudget { total_fraction, free_fraction, static_fraction };
// Admission: optimistic (vLLM: admit while the first chunk fits, preempt by recompute when a
// running sequence cannot grow); reserve (TensorRT-LLM's GUARANTEED_NO_EVICT: admit only when
// the blocks for the whole prompt + output are free, and hold them; nothing is ever preempted);
// max_utilization (TensorRT-LLM's MAX_UTILIZATION: admit while this step fits, pause the most
// recently started requests when a running one cannot grow; a paused request frees its KV and
// runs its context again, so it is optimistic admission with recompute and no watermark); ratio
// (SGLang: admit while the free KV covers the prompt plus new_token_ratio of every admitted and
// running request's remaining output, the ratio decaying per decode step and raised when
// decodes run out of memory and retract requests; RatioAdmission).
enum class Admission { optimistic, reserve, max_utilization, ratio };
// SGLang's new-token-ratio estimate (python/sglang/srt/managers/scheduler.py, schedule_policy.py,
// global_config.py): starts at `init`, falls by (init − min) / decay_steps per decode batch to
// `min`, back to `init` when nothing runs; a retraction sets it to (decoded + retract_steps ×
// running) / Σ max_new_tokens of the running requests, at most 1. Outputs count at most
// `clip_tokens` (CLIP_MAX_NEW_TOKENS_ESTIMATION).
struct RatioAdmission {
  double init = 0.7, min = 0.098;
  std::int64_t decay_steps = 600, retract_steps = 20, clip_tokens = 4096;
};
// What preemption does with a sequence's KV cache (vLLM V0's preemption_mode): drop it and
// recompute the prompt and the generated tokens later, or copy its blocks to the host's swap
// space and copy them back before it runs again (over the GPU's PCIe link, serial with the
// iteration, as vLLM's cache engine issues the copies before the model runs).
enum class Preemption { recompute, swap };
struct SchedulerOptions {
  std::int64_t max_batch_tokens = 8192;
  std::int64_t max_seqs = 256;
  std::int64_t block_size = 16;
  double watermark = 0.01;
  double gpu_memory_utilization = 0.9;  // the KV budget's fraction
  // The fraction by the replica's TP degree, where the engine's default depends on it (SGLang):
  // (smallest TP, fraction) in increasing TP; the last entry at or below the TP applies. Empty:
  // gpu_memory_utilization for every TP.
  std::vector<std::pair<std::int64_t, double>> memory_fraction_by_tp;
  KvBudget kv_budget = KvBudget::total_fraction;
  Admission admission = Admission::optimistic;
  RatioAdmission ratio;
  // Whether an iteration mixes prefill chunks with decodes (vLLM's chunked prefill, TensorRT-LLM
  // inflight batching), or runs prefills alone whenever any can run and decodes otherwise
  // (SGLang's default, enable_mixed_chunk off); a decode-only batch then has no token budget.
  bool mixed_batches = true;
  Preemption preemption = Preemption::recompute;
  // Swap space per GPU (vLLM's --swap-space, 4 GiB by default), and the blocks it holds (set
  // from the KV bytes of a block per GPU when the replica is built). A preemption that does not
  // fit falls back to recompute (vLLM V0 aborts the request instead).
  double swap_space_bytes = 4.0 * (1ull << 30);
  std::int64_t swap_blocks = 0;
  // Decode-only batches up to the largest size run as the CUDA graph of the next captured size
  // (the batch is padded to it); empty: no graphs.
  std::vector<std::int64_t> cuda_graph_sizes;
  // Host work per iteration, serial with the GPU (scheduling, input preparation, sampling,
  // output processing): fixed + per sequence in the batch, + extra when the replica has more
  // than one GPU (workers to coordinate). All zero: not modelled.
  double cpu_fixed_s = 0, cpu_per_sequence_s = 0, cpu_multi_gpu_extra_s = 0;
  // Automatic prefix caching (prefix_cache.hpp): a request of a prefix group starts from the
  // group's cached leading blocks.
  bool prefix_caching = false;
  // Speculative decoding (speculative.hpp): a decoding sequence verifies up to this many draft
  // tokens per iteration (never more than its remaining output − 1); each takes a slot of the
  // token budget and of the KV cache, as vLLM counts lookahead slots. A serving simulation sets
  // it from ServingSetup::speculative when it builds the replicas.
  std::int64_t speculative_tokens = 0;
  double memory_fraction(std::int64_t tp) const {
    double f = gpu_memory_utilization;
    for (const auto& [min_tp, fraction] : memory_fraction_by_tp)
      if (tp >= min_tp) f = fraction;
    return f;
  }
  double cpu_seconds(std::int64_t sequences, std::int64_t gpus) const {
    return cpu_fixed_s + cpu_per_sequence_s * static_cast<double>(sequences) +
           (gpus > 1 ? cpu_multi_gpu_extra_s : 0.0);
  }
};

struct RequestState {
  std::int64_t prompt = 0, output = 0;
  std::int64_t computed = 0;   // tokens whose KV is cached
  std::int64_t generated = 0;  // output tokens produced so far
  std::int64_t blocks = 0;     // KV blocks covering its tokens, shared prefix blocks included
  // Prefix caching: the group whose first `prefix_tokens` tokens this request shares (-1: none),
  // the block indices of that prefix it holds in the cache (they are among `blocks`), and the
  // prompt tokens its first admission found cached (-1: not admitted yet).
  std::int64_t prefix_group = -1, prefix_tokens = 0;
  std::vector<std::int32_t> shared;
  std::int64_t first_cached_tokens = -1;
  std::int64_t swapped_blocks = 0;  // blocks on the host after a preemption by swap
  std::int32_t replica = -1;
  bool in_flight = false;
  bool scheduled = false;
  Time arrival, first_scheduled, first_token, last_token, finished;
  std::int64_t known() const { return prompt + generated; }
  std::int64_t pending() const { return known() - computed; }
  std::int64_t private_blocks() const { return blocks - static_cast<std::int64_t>(shared.size()); }
  bool decoding() const { return computed >= prompt && pending() == 1; }
};

struct BatchEntry {
  std::int32_t request = 0;
  std::int64_t tokens = 0;
  std::int64_t context = 0;  // cached tokens before this iteration
  bool decode = false;
};

struct Batch {
  std::vector<BatchEntry> entries;
  BatchShape shape;
  std::int64_t preempted = 0;
  std::int64_t recomputed_tokens = 0;  // cached tokens the preemptions threw away
  std::int64_t swapped_out_blocks = 0, swapped_in_blocks = 0;  // copied this iteration
};

class ReplicaScheduler {
 public:
  ReplicaScheduler(SchedulerOptions options, std::int64_t blocks);

  void enqueue(std::int32_t request) { waiting_.push_back(request); }
  // Forms the next iteration's batch from the sequences not in flight; marks them in flight and
  // allocates their blocks. Empty when nothing can run now.
  Batch form_batch(std::vector<RequestState>& reqs);
  // Ends a request here: frees its blocks and drops it from the running set.
  void finish(std::vector<RequestState>& reqs, std::int32_t request);
  // Ends a request whose cache moved to another replica: frees the `blocks` it held here
  // privately and lets go of the prefix blocks `shared` of `group`.
  void hand_off(std::int32_t request, std::int64_t blocks, std::int64_t group,
                const std::vector<std::int32_t>& shared);
  // After an iteration computed request `request`'s tokens from `before` on: the prefix blocks
  // it filled join the cache.
  void computed(std::vector<RequestState>& reqs, std::int32_t request, std::int64_t before);
  // Takes a request whose KV cache arrived from elsewhere (disaggregated decode): its blocks are
  // already reserved with `reserve`.
  void adopt(std::int32_t request) { running_.push_back(request); }
  bool reserve(std::vector<RequestState>& reqs, std::int32_t request, std::int64_t tokens);
  // A sequence slot and blocks for `tokens`: can a transferred request be adopted now?
  bool can_adopt(std::int64_t tokens) const;

  const BlockPool& pool() const { return pool_; }
  const PrefixCache& cache() const { return cache_; }
  // Blocks sequences hold (cached blocks nobody holds are free to take, as vLLM reports usage).
  std::int64_t blocks_in_use() const { return pool_.used() - cache_.idle(); }
  // Prefix-cache lookups of admitted requests: prompt tokens looked up and found cached.
  std::int64_t prefix_queried_tokens() const { return queried_tokens_; }
  std::int64_t prefix_hit_tokens() const { return hit_tokens_; }
  const std::vector<std::int32_t>& running() const { return running_; }
  const std::deque<std::int32_t>& waiting() const { return waiting_; }
  const std::deque<std::int32_t>& swapped() const { return swapped_; }
  std::int64_t swap_used() const { return swap_used_; }
  // Ratio admission: the current new-token ratio.
  double new_token_ratio() const { return new_token_ratio_; }
  const SchedulerOptions& options() const { return opt_; }
  // Work-conservation probe: something could run now but the last batch left it out.
  bool has_runnable(const std::vector<RequestState>& reqs) const;

 private:
  void preempt(std::vector<RequestState>& reqs, std::size_t running_index, Batch& b);
  // Blocks free to allocate: never used, or cached with no holder (evicted when taken).
  std::int64_t available() const { return pool_.free() + cache_.idle(); }
  void take(std::int64_t n);
  // Frees a request's private blocks and lets go of its cached prefix blocks.
  void release_all(RequestState& r);
  // Blocks admitting `r` with a first chunk of `n` tokens takes when `computed` of its tokens are
  // cached in the `held` blocks it has.
  std::int64_t admission_blocks(const RequestState& r, std::int64_t computed, std::int64_t held,
                                std::int64_t n) const;
  // Admission leaves `blocks_left` free blocks, and ratio admission expects `expected_tokens`
  // more of them to fill: does it keep the watermark?
  bool admissible(std::int64_t blocks_left, std::int64_t expected_tokens) const;
  // Ratio admission: the tokens a request's remaining output is expected to need.
  std::int64_t ratio_reserve(const RequestState& r) const;
  // The same, summed over the running sequences (SGLang's reservation for running requests).
  std::int64_t running_ratio_reserve(const std::vector<RequestState>& reqs) const;
  // The running sequences' prefill chunks and decodes (prefills or decodes only when
  // `only` is set: unmixed batches), in admission order; preempts to make room.
  enum class Only { any, prefills, decodes };
  void schedule_running(std::vector<RequestState>& reqs, Batch& b, std::int64_t& budget, Only only);
  // Swapped-out sequences back, then waiting requests, while they fit.
  void admit(std::vector<RequestState>& reqs, Batch& b, std::int64_t& budget);
  // Puts `n` of request `id`'s tokens into the batch.
  static void add(std::vector<RequestState>& reqs, Batch& b, std::int64_t& budget, std::int32_t id,
                  std::int64_t n);

  SchedulerOptions opt_;
  BlockPool pool_;
  PrefixCache cache_;
  std::int64_t watermark_blocks_ = 0, queried_tokens_ = 0, hit_tokens_ = 0;
  std::vector<std::int32_t> running_;  // admission order: the last is preempted first
  std::deque<std::int32_t> waiting_;
  std::deque<std::int32_t> swapped_;  // preempted by swap, in preemption order
  std::int64_t swap_used_ = 0;
  double new_token_ratio_ = 0;
};

}  // namespace meshsim
