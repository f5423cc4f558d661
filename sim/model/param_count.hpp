#pragma once
// Parameters of a model, counted from its architecture (every weight matrix, bias and norm).
#include <cstdint>

#include "model/model_spec.hpp"

namespace meshsim {

struct ParamCount {
  double total = 0;           // stored
  double active = 0;          // used by one token (MoE: top-k routed experts plus the shared ones)
  double embedding = 0;       // token embedding table (plus learned positions)
  double output = 0;          // LM head, zero when tied to the embedding
  double routed_experts = 0;  // all routed expert weights (sharded by EP)
};

// Weights of one layer's parts; `ffn` is the intermediate size of one MLP.
double attention_params(const ModelSpec& m);
double mlp_params(const ModelSpec& m, std::int64_t ffn);
double norm_params(const ModelSpec& m);  // one norm of width `hidden`
double layer_params(const ModelSpec& m, std::int64_t layer);
// The part of layer_params one expert-parallel rank builds: an MoE layer's routed experts split
// over `expert_parallel` ranks (experts / EP each), everything else whole.
double layer_params_on_rank(const ModelSpec& m, std::int64_t layer, std::int64_t expert_parallel);
double layer_active_params(const ModelSpec& m, std::int64_t layer);

// For a model known only by its count (ModelSpec::declared_params) total = active = that count.
ParamCount count_params(const ModelSpec& m);

}  // namespace meshsim
