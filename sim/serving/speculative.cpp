#include "serving/speculative.hpp"

#include <fmt/format.h>

#include <cmath>

namespace meshsim {

double SpeculativeDecoding::expected_tokens_per_step() const {
  if (!enabled()) return 1.0;
  if (acceptance >= 1.0) return static_cast<double>(tokens + 1);
  return (1.0 - std::pow(acceptance, static_cast<double>(tokens + 1))) / (1.0 - acceptance);
}

std::string SpeculativeDecoding::describe() const {
  if (!enabled()) return "off";
  return fmt::format("{} proposing {} tokens, acceptance {}",
                     proposer == Proposer::mtp ? std::string("MTP head")
                                               : "draft model " + (draft ? draft->name : "?"),
                     tokens, acceptance);
}

std::int64_t accepted_drafts(Rng& rng, double acceptance, std::int64_t proposed) {
  std::int64_t a = 0;
  // α = 1 and α = 0 need no draws (and stay exact).
  if (acceptance >= 1.0) return proposed;
  if (acceptance <= 0.0) return 0;
  while (a < proposed && rng.uniform01() < acceptance) ++a;
  return a;
}

DraftCost::DraftCost(const Topology& topo, const SpeculativeDecoding& spec,
                     const ReplicaShape& shape, std::vector<std::int32_t> gpus,
                     const ComputeModel& compute, CommContext& comm, StepCost& target_cost)
    : spec_(spec), target_(target_cost) {
  if (spec.proposer == Proposer::draft_model && spec.draft) {
    ReplicaShape ds = shape;
    ds.pp = 1;
    gpus.resize(static_cast<std::size_t>(shape.tp));
    draft_.emplace(topo, *spec.draft, ds, std::move(gpus), compute, comm);
  }
}

double DraftCost::seconds(const BatchShape& batch) {
  if (!spec_.enabled()) return 0;
  const std::int64_t passes =
      std::max<std::int64_t>(batch.draft_passes, batch.prefill.empty() ? 0 : 1);
  // Σ of the decoding sequences' cached tokens before this step.
  const std::int64_t cached = batch.decode_context - batch.decodes - batch.speculated;
  double s = 0;
  for (std::int64_t j = 1; j <= passes; ++j) {
    BatchShape p;
    if (j == 1) p.prefill = batch.prefill;
    if (j <= batch.draft_passes) {
      p.decodes = batch.decodes;
      p.decode_context = cached + j * batch.decodes;
      p.sampled = batch.decodes;
    }
    if (draft_)
      s += draft_->stage_seconds(0, p);
    else
      s += target_.layer_pass_seconds(p) + target_.ends_seconds(target_.shape().pp - 1, p);
  }
  return s;
}

}  // namespace meshsim
