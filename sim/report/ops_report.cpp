#include "report/ops_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "model/op_catalogue.hpp"
#include "strategy/layer_plan.hpp"

namespace meshsim {
namespace {

// A memory kernel's traffic in MB, GB or TB with three significant digits ("1.41 GB", not
// "1.41e+03 MB").
std::string traffic_text(double bytes) {
  const char* unit = "MB";
  double v = bytes / 1e6;
  for (const char* next : {"GB", "TB"}) {
    if (v < 999.5) break;
    v /= 1e3;
    unit = next;
  }
  return fmt::format("{:.3g} {}", v, unit);
}

std::string shape_of(const Kernel& k) {
  switch (k.kind) {
    case KernelKind::gemm:
      return k.gemm.batch > 1
                 ? fmt::format("{}×({}×{}×{})", k.gemm.batch, k.gemm.m, k.gemm.n, k.gemm.k)
                 : fmt::format("{}×{}×{}", k.gemm.m, k.gemm.n, k.gemm.k);
    case KernelKind::attention: {
      const auto& a = k.attention;
      return fmt::format("b{} q{} kv{} h{}/{} d{}", a.batch, a.seq_q, a.seq_kv, a.heads, a.kv_heads,
                         a.head_dim);
    }
    case KernelKind::memory_bound:
      return traffic_text(k.bytes);
    case KernelKind::none:
      break;
  }
  return "";
}

std::string kind_of(const Kernel& k) {
  return k.kind == KernelKind::memory_bound ? "memory" : std::string(name_of(k.kind));
}

std::string class_of(const Kernel& k) {
  if (k.kind == KernelKind::memory_bound) return std::string(name_of(k.memory_class));
  if (k.kind == KernelKind::attention && is_decode(k.attention)) return "decode_attention";
  return std::string(name_of(k.kind));
}

void add_row(OpsReport& r, const ComputeModel& cm, const std::string& name, const char* part,
             const Kernel& k, bool ends) {
  if (k.empty()) return;
  OpsRow row{name,    part,    kind_of(k),    class_of(k), shape_of(k),
             k.flops, k.bytes, cm.seconds(k), ends};
  if (!ends) r.layer_time_s += row.time_s;
  r.rows.push_back(std::move(row));
}

// The pass's rows of one op (or GEMM part): forward, or dgrad and wgrad.
void add_passes(OpsReport& r, const ComputeModel& cm, const std::string& name,
                const Kernel& forward, const Kernel& dgrad, const Kernel& wgrad, bool ends) {
  if (!r.request.backward) {
    add_row(r, cm, name, "forward", forward, ends);
  } else {
    add_row(r, cm, name, "dgrad", dgrad, ends);
    add_row(r, cm, name, "wgrad", wgrad, ends);
  }
}

// The FP8 quantization kernels the stack runs around a GEMM op, as rows "<op>.fp8_<label>"
// (".fp8_cast", ".fp8_amax", ".fp8_weight_cast", ...; the view has no sequence parallelism: an
// output gradient is cast whole).
void add_fp8_casts(OpsReport& r, const ComputeModel& cm, const OpSpec& op, bool ends) {
  const auto casts = fp8_cast_kernels(op, *r.request.stack, r.request.tp, false);
  const auto& kernels = r.request.backward ? casts.dgrad : casts.forward;
  const auto& labels = r.request.backward ? casts.dgrad_labels : casts.forward_labels;
  for (std::size_t i = 0; i < kernels.size(); ++i)
    add_row(r, cm, op.name + ".fp8_" + std::string(labels[i]),
            r.request.backward ? "dgrad" : "forward", kernels[i], ends);
}

// One op as the stack runs it: its GEMM parts, or its eager kernels priced as the trace prices
// them (strategy/layer_plan.hpp).
void add_stack_op(OpsReport& r, const ComputeModel& cm, const OpSpec& op, bool ends) {
  const Stack& st = *r.request.stack;
  if (runs_as_parts(op, st)) {
    for (const auto& [part, columns] : op.gemm_parts) {
      const auto k = gemm_part_kernels(op, columns);
      add_passes(r, cm, op.name + "." + part, k.forward, k.backward_input, k.backward_weight, ends);
    }
    add_fp8_casts(r, cm, op, ends);
    return;
  }
  const OpKernels* split = st.kernels_of(op.name);
  const Kernel& k = r.request.backward ? op.backward_input : op.forward;
  if (!split || k.kind != KernelKind::memory_bound) {
    add_passes(r, cm, op.name, op.forward, op.backward_input, op.backward_weight, ends);
    add_fp8_casts(r, cm, op, ends);
    return;
  }
  const auto cost = price_op(op, PlanPricing{cm, st, nullptr, {}});
  const int n = r.request.backward ? split->backward_kernels : split->forward_kernels;
  const double f = r.request.backward ? split->backward_bytes_factor : split->forward_bytes_factor;
  OpsRow row{op.name,
             r.request.backward ? "dgrad" : "forward",
             kind_of(k),
             std::string(name_of(split->kernel_class.value_or(k.memory_class))),
             fmt::format("{} × {}", n, traffic_text(k.bytes * f / n)),
             k.flops,
             k.bytes * f,
             (r.request.backward ? cost.dgrad : cost.forward).time.seconds(),
             ends,
             n};
  if (!ends) r.layer_time_s += row.time_s;
  r.rows.push_back(std::move(row));
}

void add_ops(OpsReport& r, const ComputeModel& cm, const std::vector<OpSpec>& ops, bool ends) {
  for (const auto& op : ops) {
    if (r.request.stack)
      add_stack_op(r, cm, op, ends);
    else
      add_passes(r, cm, op.name, op.forward, op.backward_input, op.backward_weight, ends);
  }
}

}  // namespace

OpsReport ops_report(const ModelSpec& model, const ComputeModel& cm, const OpsRequest& q) {
  if (!model.has_architecture())
    throw Error(model.file, "",
                "model '" + model.name + "' has no architecture: no kernels to list");
  if (q.tokens < 1) throw Error("", "--tokens", "must be a positive integer");
  if (q.tp < 1 || model.heads % q.tp != 0)
    throw Error(
        "", "--tp",
        fmt::format("{} does not divide the model's {} attention heads", q.tp, model.heads));
  if (q.context < 0) throw Error("", "--context", "must not be negative");
  if (q.decode < 0) throw Error("", "--decode", "must not be negative");
  if (q.decode > 0 && q.context == 0)
    throw Error("", "--context", "a decode step needs the sequences' context (--context C)");
  if (q.decode > 0 && q.backward) throw Error("", "--pass", "decode has no backward pass");
  if (q.layer >= model.layers)
    throw Error("", "--layer", fmt::format("the model has {} layers", model.layers));
  OpsReport r;
  r.gpu = cm.gpu().model;
  r.model = model.name;
  r.source = cm.describe();
  r.host_per_kernel_s = cm.host_per_kernel_s();
  r.request = q;
  r.layer = q.layer;
  if (r.layer < 0) {
    r.layer = 0;
    if (model.moe)
      while (r.layer + 1 < model.layers && !model.is_moe_layer(r.layer)) ++r.layer;
  }
  LayerShape shape;
  shape.micro_batch = 1;
  shape.seq = q.tokens;
  shape.dtype = q.dtype;
  if (q.stack) shape.fp8_routed_experts = q.stack->fp8_routed_experts;
  const Sharding sh{.tp = q.tp, .sp = false, .cp = 1, .ep = model.moe ? q.tp : 1};
  auto ops = layer_ops(model, r.layer, shape, sh);
  for (auto& op : ops) {
    if (op.forward.kind != KernelKind::attention) continue;
    // A chunk after cached context, or one decode step: the same kernel at another shape.
    auto a = op.forward.attention;
    if (q.decode > 0) {
      a.batch = q.decode;
      a.seq_q = 1;
      a.seq_kv = q.context;
    } else {
      a.seq_kv = q.context + q.tokens;
    }
    op.forward = attention_kernel(a, op.forward.dtype);
    a.backward = true;
    op.backward_input = attention_kernel(a, op.forward.dtype);
  }
  add_ops(r, cm, ops, false);
  add_ops(r, cm, embedding_ops(model, shape, sh), true);
  add_ops(r, cm, head_ops(model, shape, sh), true);
  for (const auto& row : r.rows)
    if (!row.ends) r.layer_host_s += r.host_s(row);
  return r;
}

Json to_json(const OpsReport& r) {
  Json ops = Json::array();
  for (const auto& row : r.rows) {
    Json o = {{"name", row.name},   {"kind", row.kind},   {"class", row.kernel_class},
              {"pass", row.part},   {"shape", row.shape}, {"time_s", row.time_s},
              {"flops", row.flops}, {"bytes", row.bytes}};
    if (row.ends) o["ends"] = true;
    if (row.kernels > 1) o["kernels"] = row.kernels;
    if (r.host_per_kernel_s > 0) o["host_s"] = r.host_s(row);
    ops.push_back(std::move(o));
  }
  Json j = {{"gpu", r.gpu},
            {"model", r.model},
            {"dtype", name_of(r.request.dtype)},
            {"tokens", r.request.tokens},
            {"tp", r.request.tp},
            {"layer", r.layer},
            {"pass", r.request.backward ? "backward" : "forward"},
            {"context", r.request.context},
            {"decode", r.request.decode},
            {"kernel_model", r.source},
            {"stack", r.request.stack ? r.request.stack->name : "catalogue"},
            {"ops", std::move(ops)},
            {"layer_time_s", r.layer_time_s}};
  if (r.host_per_kernel_s > 0) {
    j["host_per_kernel_s"] = r.host_per_kernel_s;
    j["layer_host_s"] = r.layer_host_s;
  }
  return j;
}

std::string to_text(const OpsReport& r) {
  std::string s = fmt::format(
      "# meshsim ops: {} layer {} on {}, {} tokens, tp {}, {}, {}{}{}\n# kernel model: {}\n"
      "# stack: {}\n",
      r.model, r.layer, r.gpu, r.request.tokens, r.request.tp, name_of(r.request.dtype),
      r.request.backward ? "backward" : "forward",
      r.request.context ? fmt::format(", context {}", r.request.context) : "",
      r.request.decode ? fmt::format(", decode of {} sequences", r.request.decode) : "", r.source,
      r.request.stack ? r.request.stack->name + " (its kernels: GEMM parts and eager splits)"
                      : std::string("the catalogue's fused kernels"));
  const bool host = r.host_per_kernel_s > 0;
  // The op column is as wide as the longest name (22 at least), so a long one such as
  // DeepSeek-V3's shared_expert_activation does not push its row out of line.
  std::size_t name_w = 22;
  for (const auto& row : r.rows) name_w = std::max(name_w, row.name.size());
  s += fmt::format("{:<{}} {:<7} {:<17} {:<30} {:>10} {:>10} {:>10} {:>13} {:>6}{}\n", "op", name_w,
                   "pass", "kernel class", "shape", "GFLOP", "MB", "time µs", "achieved", "share",
                   host ? fmt::format(" {:>10}", "host µs") : std::string());
  bool ends_header = false;
  for (const auto& row : r.rows) {
    if (row.ends && !ends_header) {
      s += fmt::format(
          "{:<{}} {:>10.1f} µs{}\n# model ends (first and last pipeline stage)\n", "layer total",
          name_w, r.layer_time_s * 1e6,
          host ? fmt::format(", launched in {:.1f} µs of host time{}", r.layer_host_s * 1e6,
                             r.layer_host_s > r.layer_time_s ? ": launch-bound" : "")
               : std::string());
      ends_header = true;
    }
    const std::string achieved = row.kind == "memory"
                                     ? fmt::format("{:.0f} GB/s", row.bytes / row.time_s / 1e9)
                                     : fmt::format("{:.1f} TFLOP/s", row.flops / row.time_s / 1e12);
    const std::string share =
        row.ends ? "" : fmt::format("{:.1f}%", 100 * row.time_s / r.layer_time_s);
    s += fmt::format("{:<{}} {:<7} {:<17} {:<30} {:>10.3f} {:>10.3f} {:>10.2f} {:>13} {:>6}{}\n",
                     row.name, name_w, row.part, row.kernel_class, row.shape, row.flops / 1e9,
                     row.bytes / 1e6, row.time_s * 1e6, achieved, share,
                     host ? fmt::format(" {:>10.2f}", r.host_s(row) * 1e6) : std::string());
  }
  return s;
}

}  // namespace meshsim
