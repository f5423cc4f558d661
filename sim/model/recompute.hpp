#pragma once
// Selective recompute as regions of a layer: which ops re-run before the layer's backward and
// which stored tensors that frees, resolved against one layer's op catalogue.
#include <string>
#include <vector>

#include "model/op_catalogue.hpp"

namespace meshsim {

// One checkpointed region of a layer under selective recompute (stack/stack.hpp
// RecomputePolicy): its `ops` (catalogue names, or "op.part" for one part of a GEMM) re-run
// before the layer's backward. `frees` names the stored tensors it drops: "op" what the op
// stores (an attention core keeps its Q, K, V, as a checkpointed core attention keeps its
// inputs, and drops only its score tensors), "op.input" only the op's stored input (the output
// of the op before it, which an output-discarding checkpoint frees). Empty `frees`: the ops' own
// stored tensors, GEMM parts left out (their input another part still needs). The region acts on
// the layers that have the op `needs` (empty: every layer); listed ops a layer lacks are skipped.
// `reruns_collectives`: the checkpoint re-runs the collectives of its ops with them, a TP-sharded
// GEMM's gather or reduction and the MoE dispatch's and combine's all-to-alls (Megatron's
// tensor_parallel.checkpoint around a whole MLP re-runs the sequence-parallel all-gather inside
// fc1 and the reduction after fc2, around an MoE layer its token dispatcher's all-to-alls);
// otherwise the stack keeps what they produced (torchtitan's op-level AC saves collective
// outputs).
struct RecomputeUnit {
  std::vector<std::string> ops;
  std::vector<std::string> frees;
  std::string needs;
  bool reruns_collectives = false;
  bool operator==(const RecomputeUnit&) const = default;
};

// What selective recompute does to one layer: the ops (or GEMM parts) it re-runs, those of them
// whose collectives re-run too (RecomputeUnit::reruns_collectives), and the bytes it stops
// storing. No units: Korthikanti et al.'s set, the attention score tensors (softmax and its
// neighbours, absent with fused attention).
struct LayerRecompute {
  std::vector<std::string> ops;
  std::vector<std::string> ops_with_collectives;
  double freed_bytes = 0;
};
LayerRecompute resolve_recompute(const std::vector<OpSpec>& layer,
                                 const std::vector<RecomputeUnit>& units);

// Whether one of `units` acts on a layer of `model` (some layer has the op its `needs` names):
// Megatron's moe module acts on no layer of a dense model. A model without an architecture
// has no layers to check: true.
bool acts_on(const ModelSpec& model, const std::vector<RecomputeUnit>& units);

}  // namespace meshsim
