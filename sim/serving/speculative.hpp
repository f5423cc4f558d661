#pragma once
// Speculative decoding (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
// Decoding"; Chen et al. 2023): a cheap proposer drafts K tokens per decoding sequence, one after
// another, and the target model verifies all K + 1 positions in one forward pass; the leading
// drafts that agree are kept, plus one token of the target's own, so a step emits 1 … K + 1
// tokens. The proposer is a small draft model run on the replica's GPUs, or an MTP head
// (DeepSeek-V3's multi-token prediction module: one transformer block and the shared LM head).
//
// Acceptance is the probability that a draft token is kept given every draft before it was
// (the paper's α), independent across tokens and steps: a step with K drafts emits
// (1 − α^(K+1)) / (1 − α) tokens on average. Each step's count is drawn from meshsim's seeded
// generator, so runs repeat exactly. Assumptions (README): acceptance does not depend on the
// request or position; the MTP module costs one of the model's own layers plus the LM head (its
// input projection is not priced); the draft model runs on the first stage's GPUs at the replica's
// TP degree, and its weights and KV cache come out of the KV budget.
#include <cstdint>
#include <optional>
#include <string>

#include "compute/compute_model.hpp"
#include "core/rng.hpp"
#include "model/model_spec.hpp"
#include "serving/step_cost.hpp"
#include "strategy/comm_model.hpp"
#include "topology/topology.hpp"

namespace meshsim {

enum class Proposer { none, draft_model, mtp };

struct SpeculativeDecoding {
  Proposer proposer = Proposer::none;
  std::int64_t tokens = 0;         // K: drafts per step
  double acceptance = 0;           // α in [0, 1]
  std::optional<ModelSpec> draft;  // Proposer::draft_model
  std::uint64_t seed = 1;
  bool enabled() const { return proposer != Proposer::none && tokens > 0; }
  // (1 − α^(K+1)) / (1 − α); K + 1 at α = 1.
  double expected_tokens_per_step() const;
  std::string describe() const;
};

// The leading accepted drafts of `proposed`, each kept with probability `acceptance` while all
// before it were.
std::int64_t accepted_drafts(Rng& rng, double acceptance, std::int64_t proposed);

// The proposer's time in one iteration: `batch.draft_passes` sequential passes over the decoding
// sequences (pass j attends to j more tokens than the sequence has cached), the first one also
// over the iteration's prefill chunks, so that the proposer's KV cache covers the prompt.
class DraftCost {
 public:
  DraftCost(const Topology& topo, const SpeculativeDecoding& spec, const ReplicaShape& shape,
            std::vector<std::int32_t> gpus, const ComputeModel& compute, CommContext& comm,
            StepCost& target_cost);
  double seconds(const BatchShape& batch);

 private:
  const SpeculativeDecoding& spec_;
  StepCost& target_;
  std::optional<StepCost> draft_;  // the draft model's own step cost
};

}  // namespace meshsim
