#include "model/recompute.hpp"

#include <algorithm>
#include <string_view>

namespace meshsim {

namespace {

bool contains(const std::vector<std::string>& names, std::string_view n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

// What `op` stops storing when a checkpoint drops its tensors.
double dropped_bytes(const OpSpec& op) {
  return op.score_bytes + (op.role == TpRole::sharded_core ? 0.0 : op.saved_bytes);
}

}  // namespace

bool acts_on(const ModelSpec& model, const std::vector<RecomputeUnit>& units) {
  if (!model.has_architecture()) return true;
  // A model's layers are of two kinds at most: dense and MoE.
  std::vector<std::int64_t> kinds{0};
  for (std::int64_t l = 0; l < model.layers; ++l)
    if (model.is_moe_layer(l) != model.is_moe_layer(0)) {
      kinds.push_back(l);
      break;
    }
  for (const auto l : kinds) {
    const auto ops = layer_ops(model, l, {}, {});
    for (const auto& u : units)
      if (u.needs.empty() ||
          std::any_of(ops.begin(), ops.end(), [&](const OpSpec& op) { return op.name == u.needs; }))
        return true;
  }
  return false;
}

LayerRecompute resolve_recompute(const std::vector<OpSpec>& layer,
                                 const std::vector<RecomputeUnit>& units) {
  LayerRecompute out;
  if (units.empty()) {
    out.ops = {"attention_scores", "softmax", "attention_values"};
    for (const auto& op : layer)
      if (op.role == TpRole::sharded_core) out.freed_bytes += dropped_bytes(op);
    return out;
  }
  const auto has = [&](std::string_view name) {
    return std::any_of(layer.begin(), layer.end(),
                       [&](const OpSpec& op) { return op.name == name; });
  };
  // Each tensor is freed once, however many regions name it.
  std::vector<std::string> freed;
  const auto free = [&](const std::string& tensor, double bytes) {
    if (contains(freed, tensor)) return;
    freed.push_back(tensor);
    out.freed_bytes += bytes;
  };
  for (const auto& u : units) {
    if (!u.needs.empty() && !has(u.needs)) continue;
    for (const auto& name : u.ops) {
      if (!contains(out.ops, name)) out.ops.push_back(name);
      if (u.reruns_collectives && !contains(out.ops_with_collectives, name))
        out.ops_with_collectives.push_back(name);
    }
    for (const auto& op : layer) {
      if (u.frees.empty()) {
        if (contains(u.ops, op.name)) free(op.name, dropped_bytes(op));
        continue;
      }
      if (contains(u.frees, op.name)) free(op.name, dropped_bytes(op));
      if (contains(u.frees, op.name + ".input")) free(op.name + ".input", op.saved_input_bytes);
    }
  }
  return out;
}

}  // namespace meshsim
