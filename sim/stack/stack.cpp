#include "stack/stack.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/enum_names.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"

namespace meshsim {

std::string_view name_of(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "?";
}

std::optional<Recompute> parse_recompute(std::string_view s) {
  return parse_by_name<Recompute>(kAllRecompute, s);
}

std::string_view name_of(CudaGraphs g) {
  switch (g) {
    case CudaGraphs::none:
      return "none";
    case CudaGraphs::layer:
      return "layer";
    case CudaGraphs::iteration:
      return "iteration";
  }
  return "?";
}

std::string_view name_of(EpDispatch d) {
  switch (d) {
    case EpDispatch::all_to_all:
      return "all_to_all";
    case EpDispatch::deepep:
      return "deepep";
  }
  return "?";
}

std::string_view name_of(ShardedWithPp s) {
  switch (s) {
    case ShardedWithPp::every_microbatch:
      return "every_microbatch";
    case ShardedWithPp::once_per_step:
      return "once_per_step";
  }
  return "?";
}

std::string_view name_of(CpComm c) {
  switch (c) {
    case CpComm::ring:
      return "ring";
    case CpComm::allgather:
      return "allgather";
  }
  return "?";
}

std::string_view name_of(PipelineSplitMethod m) {
  switch (m) {
    case PipelineSplitMethod::balanced:
      return "balanced";
    case PipelineSplitMethod::even:
      return "even";
    case PipelineSplitMethod::parameters:
      return "parameters";
  }
  return "?";
}

std::vector<std::int64_t> uneven_ends_chunk_layers(std::int64_t layers, std::int64_t stages) {
  if (stages < 2 || layers % stages == 0) return {};
  const std::int64_t middle = (layers + stages - 1) / stages;
  const std::int64_t ends = layers - (stages - 2) * middle;
  if (ends < 2) return {};
  std::vector<std::int64_t> out(static_cast<std::size_t>(stages), middle);
  out.front() = (ends + 1) / 2;
  out.back() = ends / 2;
  return out;
}

std::string_view name_of(EndSwitches e) {
  switch (e) {
    case EndSwitches::none:
      return "none";
    case EndSwitches::layers:
      return "layers";
    case EndSwitches::weights:
      return "weights";
  }
  return "none";
}

bool weighted_units_divide(std::int64_t layers, std::int64_t chunks, std::int32_t embedding_layers,
                           std::int32_t loss_layers) {
  const auto units = layers + embedding_layers + loss_layers;
  return chunks > 0 && units % chunks == 0 &&
         units / chunks > std::max(embedding_layers, loss_layers);
}

PipelineSplit runnable_split(const PipelineSplit& split, std::int64_t layers, std::int64_t chunks) {
  if (split.method != PipelineSplitMethod::even || !split.must_divide || chunks < 2) return split;
  const auto divides = [&](const PipelineSplit& s) {
    return weighted_units_divide(layers, chunks, s.embedding_layers, s.loss_layers);
  };
  if (divides(split)) return split;
  for (const auto& [e, l] : {std::pair{1, 1}, std::pair{1, 0}, std::pair{0, 1}}) {
    PipelineSplit w = split;
    w.embedding_layers = e;
    w.loss_layers = l;
    if (divides(w)) return w;
  }
  return split;
}

std::vector<std::int64_t> even_chunk_layers(std::int64_t layers, std::int64_t chunks,
                                            std::int32_t embedding_layers,
                                            std::int32_t loss_layers) {
  if (chunks < 1 || chunks > layers)
    throw Error("", "pipeline split",
                fmt::format("{} chunks for {} layers (every chunk needs one)", chunks, layers));
  const std::int64_t first = chunks == 1 ? embedding_layers + loss_layers : embedding_layers;
  const std::int64_t last = chunks == 1 ? 0 : loss_layers;
  const std::int64_t units = layers + first + last;
  std::vector<std::int64_t> out(static_cast<std::size_t>(chunks), units / chunks);
  for (std::int64_t c = 0; c < units % chunks; ++c) ++out[static_cast<std::size_t>(c)];
  out.front() -= first;
  out.back() -= last;
  if (out.front() < 1 || out.back() < 1) return even_chunk_layers(layers, chunks, 0, 0);
  return out;
}

std::string_view name_of(Fp8FsdpAllGather g) {
  switch (g) {
    case Fp8FsdpAllGather::none:
      return "none";
    case Fp8FsdpAllGather::dynamic:
      return "dynamic";
    case Fp8FsdpAllGather::precomputed:
      return "precomputed";
  }
  return "?";
}

std::string_view name_of(TpOverlapMethod m) {
  switch (m) {
    case TpOverlapMethod::none:
      return "none";
    case TpOverlapMethod::userbuffers:
      return "userbuffers";
    case TpOverlapMethod::async_tp:
      return "async_tp";
  }
  return "?";
}

std::string_view name_of(Fp8Cast c) {
  switch (c) {
    case Fp8Cast::none:
      return "none";
    case Fp8Cast::transpose:
      return "transpose";
    case Fp8Cast::cast_transpose:
      return "cast_transpose";
    case Fp8Cast::amax_cast_transpose:
      return "amax_cast_transpose";
  }
  return "?";
}

double bytes_per_element(Fp8Cast c) {
  switch (c) {
    case Fp8Cast::none:
      return 0;
    case Fp8Cast::transpose:
      return 2;  // read 1 B, write 1 B
    case Fp8Cast::cast_transpose:
      return 4;  // read 2 B, write 1 B and its 1 B transpose
    case Fp8Cast::amax_cast_transpose:
      return 6;  // the amax pass reads 2 B, then cast_transpose
  }
  return 0;
}

std::vector<double> kernel_bytes_per_element(Fp8Cast c) {
  constexpr double kAmaxRead = 2;  // the reduction reads the 16-bit tensor, writes one scalar
  switch (c) {
    case Fp8Cast::none:
      return {};
    case Fp8Cast::transpose:
    case Fp8Cast::cast_transpose:
      return {bytes_per_element(c)};
    case Fp8Cast::amax_cast_transpose:
      return {kAmaxRead, bytes_per_element(Fp8Cast::cast_transpose)};
  }
  return {};
}

const RecomputePolicy* Stack::policy(std::string_view n) const {
  for (const auto& p : recompute)
    if (p.name == n) return &p;
  return nullptr;
}

const RecomputePolicy* Stack::policy_for(Recompute mode) const {
  for (const auto& p : recompute)
    if (p.mode == mode) return &p;
  return nullptr;
}

const OpKernels* Stack::kernels_of(std::string_view op) const {
  const auto it = op_kernels.find(op);
  return it == op_kernels.end() ? nullptr : &it->second;
}

bool Stack::keeps_fp8_weights() const {
  return std::ranges::none_of(
      fp8_casts, [](const auto& entry) { return entry.second.weight != Fp8Cast::none; });
}

const Fp8Casts* Stack::fp8_casts_of(std::string_view op) const {
  const auto it = fp8_casts.find(op);
  return it == fp8_casts.end() ? nullptr : &it->second;
}

bool Stack::unfused(std::string_view gemm) const {
  return std::ranges::find(unfused_gemms, gemm) != unfused_gemms.end();
}

namespace {

std::int32_t small_count(const JsonRef& v, std::int64_t lo, std::int64_t hi) {
  return static_cast<std::int32_t>(v.integer_in(lo, hi));
}

double factor(const JsonRef& v) {
  const double x = v.positive_number();
  if (x > 1000) v.fail("must be a factor in (0, 1000]");
  return x;
}

std::vector<std::string> strings(const JsonRef& v) {
  std::vector<std::string> out;
  for (const auto& e : v.array()) out.push_back(e.string());
  return out;
}

template <class E, class Range>
E enum_value(const JsonRef& v, const Range& all, std::string_view what) {
  const auto s = v.string();
  if (const auto e = parse_by_name<E>(all, s)) return *e;
  v.fail("unknown " + std::string(what) + " '" + s + "' (known: " + joined_names(all) + ")");
}

OpKernels read_op_kernels(const JsonRef& ref) {
  ObjectReader r(ref);
  OpKernels k;
  if (auto v = r.optional("forward_kernels")) k.forward_kernels = small_count(*v, 1, 64);
  if (auto v = r.optional("forward_bytes_factor")) k.forward_bytes_factor = factor(*v);
  if (auto v = r.optional("backward_kernels")) k.backward_kernels = small_count(*v, 1, 64);
  if (auto v = r.optional("backward_bytes_factor")) k.backward_bytes_factor = factor(*v);
  if (auto v = r.optional("kernel_class"))
    k.kernel_class = enum_value<MemoryClass>(*v, kAllMemoryClasses, "kernel class");
  r.finish();
  return k;
}

Fp8Casts read_fp8_casts(const JsonRef& ref) {
  ObjectReader r(ref);
  Fp8Casts c;
  c.input = enum_value<Fp8Cast>(r.required("input"), kAllFp8Casts, "FP8 cast");
  c.output_grad = enum_value<Fp8Cast>(r.required("output_grad"), kAllFp8Casts, "FP8 cast");
  if (auto v = r.optional("weight")) c.weight = enum_value<Fp8Cast>(*v, kAllFp8Casts, "FP8 cast");
  r.finish();
  return c;
}

TpOverlap read_tp_overlap(const JsonRef& ref) {
  ObjectReader r(ref);
  TpOverlap t;
  t.method =
      enum_value<TpOverlapMethod>(r.required("method"), kAllTpOverlapMethods, "TP overlap method");
  t.on = r.required("on").boolean();
  if (auto v = r.optional("rs_splits")) t.rs_splits = small_count(*v, 0, 64);
  if (auto v = r.optional("rs_sms")) t.rs_sms = small_count(*v, 0, 256);
  if (auto v = r.optional("ag_sms")) t.ag_sms = small_count(*v, 0, 256);
  if (auto v = r.optional("bulk_sms")) t.bulk_sms = small_count(*v, 0, 256);
  if (t.method == TpOverlapMethod::none && t.on) r.self().fail("'on' is true but method is none");
  if (t.method == TpOverlapMethod::userbuffers && t.rs_splits < 2)
    r.self().fail("userbuffers pipelines the reduce-scatter in rs_splits >= 2 chunks");
  r.finish();
  return t;
}

TpBackward read_tp_backward(const JsonRef& ref) {
  ObjectReader r(ref);
  TpBackward t;
  t.regather_input = r.required("regather_input").boolean();
  t.overlap_with_wgrad = r.required("overlap_with_wgrad").boolean();
  r.finish();
  return t;
}

PipelineSplit read_pipeline_split(const JsonRef& ref) {
  ObjectReader r(ref);
  PipelineSplit p;
  p.method = enum_value<PipelineSplitMethod>(r.required("method"), kAllPipelineSplitMethods,
                                             "pipeline split method");
  const auto even_only = [&](const JsonRef& v) {
    if (p.method != PipelineSplitMethod::even)
      v.fail("only an even split takes it (method is " + std::string(name_of(p.method)) + ")");
  };
  for (auto [key, field] : {std::pair{"embedding_layers", &p.embedding_layers},
                            std::pair{"loss_layers", &p.loss_layers}}) {
    if (auto v = r.optional(key)) {
      even_only(*v);
      *field = small_count(*v, 0, kMaxEndWeight);
    }
  }
  if (auto v = r.optional("must_divide")) {
    even_only(*v);
    p.must_divide = v->boolean();
  }
  if (auto v = r.optional("end_switches")) {
    even_only(*v);
    p.end_switches = enum_value<EndSwitches>(*v, kAllEndSwitches, "end switches");
  }
  r.finish();
  return p;
}

FsdpCopies read_fsdp_copies(const JsonRef& ref) {
  ObjectReader r(ref);
  FsdpCopies f;
  f.on = r.required("on").boolean();
  r.finish();
  return f;
}

Interference read_interference(const JsonRef& ref) {
  ObjectReader r(ref);
  Interference i;
  i.on = r.required("on").boolean();
  if (auto v = r.optional("nccl_sms")) i.nccl_sms = small_count(*v, 0, 256);
  if (auto v = r.optional("hbm_bytes_per_wire_byte")) i.hbm_bytes_per_wire_byte = factor(*v);
  r.finish();
  return i;
}

DataParallel read_data_parallel(const JsonRef& ref) {
  ObjectReader r(ref);
  DataParallel d;
  d.bucket_min_params = r.required("bucket_min_params").positive_number();
  if (auto v = r.optional("bucket_params_per_rank"))
    d.bucket_params_per_rank = v->non_negative_number();
  auto reduce_dtype = [](const JsonRef& v) {
    const auto t = enum_value<DType>(v, kAllDTypes, "dtype");
    if (t == DType::fp8) v.fail("gradients are not reduced in fp8");
    return t;
  };
  const auto dt = r.required("grad_reduce_dtype");
  if (dt.raw().is_object()) {
    // By training dtype; every training dtype must be named, so none falls to a silent default.
    ObjectReader by(dt);
    for (DType t : kAllDTypes) d.grad_reduce_by_dtype[t] = reduce_dtype(by.required(name_of(t)));
    by.finish();
  } else {
    d.grad_reduce_default = reduce_dtype(dt);
  }
  // Optional: absent means every_microbatch (the behaviour before the field existed).
  if (auto v = r.optional("sharded_with_pp"))
    d.sharded_with_pp = enum_value<ShardedWithPp>(*v, kAllShardedWithPp, "sharded_with_pp");
  r.finish();
  return d;
}

StateBytes read_state(const JsonRef& ref) {
  ObjectReader r(ref);
  StateBytes s;
  auto bytes = [&](std::string_view key, double& out) {
    const auto v = r.required(key);
    out = v.non_negative_number();
    if (out > 64) v.fail("more than 64 bytes per parameter");
  };
  bytes("weight", s.weight);
  bytes("grad", s.grad);
  bytes("master", s.master);
  bytes("optimizer", s.optimizer);
  r.finish();
  return s;
}

// Catalogue op names (or "op.part", "op.input"): a non-empty array of non-empty strings.
std::vector<std::string> op_names(const JsonRef& ref) {
  std::vector<std::string> names;
  for (const auto& e : ref.non_empty_array()) {
    names.push_back(e.string());
    if (names.back().empty()) e.fail("must name an op");
  }
  return names;
}

RecomputeUnit read_unit(const JsonRef& ref) {
  ObjectReader r(ref);
  RecomputeUnit u;
  u.ops = op_names(r.required("ops"));
  if (auto v = r.optional("frees")) u.frees = op_names(*v);
  if (auto v = r.optional("needs")) {
    u.needs = v->string();
    if (u.needs.empty()) v->fail("must name an op");
  }
  if (auto v = r.optional("reruns_collectives")) u.reruns_collectives = v->boolean();
  r.finish();
  return u;
}

RecomputePolicy read_policy(const JsonRef& ref) {
  ObjectReader r(ref);
  RecomputePolicy p;
  p.name = r.required("name").string();
  if (p.name.empty()) r.self().fail("a policy needs a name");
  p.description = r.required("description").string();
  p.mode = enum_value<Recompute>(r.required("mode"), kAllRecompute, "recompute mode");
  if (auto v = r.optional("ops")) {
    if (p.mode != Recompute::selective) v->fail("only a selective policy lists ops");
    if (auto ops = strings(*v); !ops.empty())
      p.units.push_back({.ops = ops, .frees = {}, .needs = {}, .reruns_collectives = false});
  }
  if (auto v = r.optional("every")) {
    if (p.mode != Recompute::full) v->fail("only a full policy checkpoints every n-th layer");
    p.every = small_count(*v, 1, 1024);
  }
  r.finish();
  return p;
}

}  // namespace

Stack read_stack(const JsonRef& ref) {
  ObjectReader r(ref);
  Stack s;
  s.file = ref.file();
  s.name = r.required("name").string();
  if (s.name.empty()) r.required("name").fail("must not be empty");
  s.description = r.required("description").string();
  for (const auto& e : r.required("sources").non_empty_array()) s.sources.push_back(e.string());
  if (auto k = r.optional("kernels")) {
    ObjectReader kr(*k);
    if (auto u = kr.optional("unfused_gemms")) s.unfused_gemms = strings(*u);
    if (auto ops = kr.optional("ops")) {
      if (!ops->raw().is_object()) ops->fail("must be an object of catalogue op names");
      for (const auto& [key, value] : ops->raw().items())
        s.op_kernels[key] = read_op_kernels(ops->child(key));
    }
    kr.finish();
  }
  s.tp_overlap = read_tp_overlap(r.required("tp_overlap"));
  // Optional: absent means neither (the behaviour before these fields existed).
  if (auto v = r.optional("tp_backward")) s.tp_backward = read_tp_backward(*v);
  s.interference = read_interference(r.required("interference"));
  if (auto v = r.optional("fsdp_copies")) s.fsdp_copies = read_fsdp_copies(*v);
  if (auto v = r.optional("cuda_graphs"))
    s.cuda_graphs = enum_value<CudaGraphs>(*v, kAllCudaGraphs, "cuda_graphs");
  if (auto v = r.optional("ep_dispatch"))
    s.ep_dispatch = enum_value<EpDispatch>(*v, kAllEpDispatch, "ep_dispatch");
  if (auto v = r.optional("cp_comm")) s.cp_comm = enum_value<CpComm>(*v, kAllCpComm, "cp_comm");
  if (auto v = r.optional("fp8_tp_all_gathers")) s.fp8_tp_all_gathers = v->boolean();
  if (auto v = r.optional("fp8_routed_experts")) s.fp8_routed_experts = v->boolean();
  if (auto v = r.optional("fp8_fsdp_all_gather"))
    s.fp8_fsdp_all_gather =
        enum_value<Fp8FsdpAllGather>(*v, kAllFp8FsdpAllGather, "FP8 FSDP all-gather");
  if (auto v = r.optional("fp8_params")) {
    s.fp8_params = v->boolean();
    if (s.fp8_params && s.fp8_fsdp_all_gather != Fp8FsdpAllGather::none)
      v->fail("FP8 parameters are gathered in FP8 already: fp8_fsdp_all_gather must be none");
  }
  if (auto v = r.optional("fp8_casts")) {
    if (!v->raw().is_object()) v->fail("must be an object of catalogue GEMM op names");
    for (const auto& [key, value] : v->raw().items()) {
      if (std::ranges::find(kFp8GemmOps, key) == kFp8GemmOps.end()) {
        v->child(key).fail(
            fmt::format("not a GEMM op with weights (known: {})", fmt::join(kFp8GemmOps, ", ")));
      }
      s.fp8_casts[key] = read_fp8_casts(v->child(key));
    }
  }
  s.data_parallel = read_data_parallel(r.required("data_parallel"));
  s.state = read_state(r.required("state_bytes_per_param"));
  // Megatron's FP8 parameters are cast from the fp32 main weights its optimizer keeps.
  if (s.fp8_params && s.state.master <= 0)
    ref.child("fp8_params")
        .fail(
            "FP8 parameters need fp32 main weights beside them (state_bytes_per_param.master > 0)");
  {
    const auto v = r.required("optimizer_bytes_per_param");
    s.optimizer_bytes_per_param = v.positive_number();
    if (s.optimizer_bytes_per_param > 256) v.fail("more than 256 bytes per parameter");
  }
  if (auto v = r.optional("grad_norm_bytes_per_param")) {
    s.grad_norm_bytes_per_param = v->non_negative_number();
    if (s.grad_norm_bytes_per_param > 64) v->fail("more than 64 bytes per parameter");
  }
  const auto policies = r.required("recompute").non_empty_array();
  for (const auto& p : policies) {
    auto policy = read_policy(p);
    if (s.policy(policy.name)) p.child("name").fail("policy '" + policy.name + "' is given twice");
    s.recompute.push_back(std::move(policy));
  }
  const auto def = r.required("default_recompute");
  s.default_recompute = def.string();
  if (!s.policy(s.default_recompute))
    def.fail("names no policy of this stack ('" + s.default_recompute + "')");
  if (auto v = r.optional("recompute_block")) s.recompute_block = v->boolean();
  if (auto v = r.optional("recompute_layer_frequency")) s.recompute_layer_frequency = v->boolean();
  if (auto v = r.optional("zero_stages")) {
    std::vector<std::int32_t> stages;
    for (const auto& z : v->non_empty_array()) {
      const auto stage = small_count(z, 0, 3);
      if (std::find(stages.begin(), stages.end(), stage) != stages.end())
        z.fail("ZeRO stage " + std::to_string(stage) + " is given twice");
      stages.push_back(stage);
    }
    std::sort(stages.begin(), stages.end());
    s.zero_stages = std::move(stages);
  }
  if (auto v = r.optional("schedules")) {
    std::vector<std::string> families;
    for (const auto& f : v->non_empty_array()) {
      const auto name = f.string();
      if (std::find(kScheduleFamilies.begin(), kScheduleFamilies.end(), name) ==
          kScheduleFamilies.end())
        f.fail(fmt::format("unknown schedule '{}' (known: {})", name,
                           fmt::join(kScheduleFamilies, ", ")));
      if (std::find(families.begin(), families.end(), name) != families.end())
        f.fail("schedule '" + name + "' is given twice");
      families.push_back(name);
    }
    if (std::find(families.begin(), families.end(), "1f1b") == families.end())
      v->fail("must include 1f1b (the schedule of a run without a pipeline)");
    s.schedules = std::move(families);
  }
  if (auto v = r.optional("pipeline_split")) s.pipeline_split = read_pipeline_split(*v);
  if (auto v = r.optional("recompute_modules")) {
    if (!v->raw().is_object() || v->raw().empty())
      v->fail("must be an object of module names, each a list of regions");
    for (const auto& [key, value] : v->raw().items()) {
      const auto regions = v->child(key).non_empty_array();
      auto& units = s.recompute_modules[key];
      for (const auto& u : regions) units.push_back(read_unit(u));
    }
  }
  r.finish();
  return s;
}

bool Stack::runs_zero(std::int32_t zero) const {
  return std::find(zero_stages.begin(), zero_stages.end(), zero) != zero_stages.end();
}

bool Stack::runs_schedule(std::string_view family) const {
  return std::find(schedules.begin(), schedules.end(), family) != schedules.end();
}

std::optional<std::string> unrun_schedule(const Stack& stack, std::string_view schedule_family) {
  if (stack.runs_schedule(schedule_family)) return std::nullopt;
  return fmt::format("stack '{}' does not run {} (its schedules: {})", stack.name, schedule_family,
                     fmt::join(stack.schedules, ", "));
}

std::vector<std::string> unrun_notes(const Stack& stack, std::int32_t zero,
                                     std::string_view schedule_family) {
  std::vector<std::string> out;
  if (!stack.runs_zero(zero))
    out.push_back(
        fmt::format("stack '{}' does not run ZeRO-{} (its stages: {}); simulated as asked",
                    stack.name, zero, stack.zero_stages_text()));
  if (auto why = unrun_schedule(stack, schedule_family))
    out.push_back(*why + "; simulated as asked");
  return out;
}

std::string Stack::zero_stages_text() const {
  std::string out;
  for (std::size_t i = 0; i < zero_stages.size(); ++i) {
    if (i > 0) out += i + 1 == zero_stages.size() ? " or " : ", ";
    out += std::to_string(zero_stages[i]);
  }
  return out;
}

Stack load_stack(const std::string& path) {
  const Json doc = load_json_file(path);
  return read_stack(JsonRef::root(doc, path));
}

Stack resolve_stack(const std::string& name_or_file) {
  if (const auto* s = bundled_stack(name_or_file)) return *s;
  require_bundled_name_or_file(name_or_file, "stack", bundled_stack_names());
  return load_stack(name_or_file);
}

bool is_fp8_linear(const OpSpec& op) {
  return op.weight_params > 0 && !op.expert_weights && op.forward.kind == KernelKind::gemm &&
         op.forward.dtype == DType::fp8;
}

bool gathers_fp8_weights(const Stack& stack) {
  return stack.fp8_params || stack.fp8_fsdp_all_gather != Fp8FsdpAllGather::none;
}

bool fsdp_gathers_fp8(const Stack& stack, const OpSpec& op) {
  return gathers_fp8_weights(stack) && is_fp8_linear(op);
}

double fsdp_gathered_bytes(bool fp8_gather, const OpSpec& op) {
  return fp8_gather && is_fp8_linear(op) ? bytes_of(DType::fp8) : kGatheredBytesPerParam;
}

double gathered_weight_bytes(double params, double fp8_params) {
  return (params - fp8_params) * kGatheredBytesPerParam + fp8_params * bytes_of(DType::fp8);
}

Stack with_fp8_params(Stack stack) {
  if (stack.state.master <= 0)
    throw Error("", "--fp8-param-gather",
                "stack '" + stack.name +
                    "' keeps no fp32 main weights beside its working weights, which FP8 "
                    "parameters are cast from");
  if (!stack.fp8_params) {
    stack.fp8_params = true;
    stack.fp8_fsdp_all_gather = Fp8FsdpAllGather::none;  // exclusive
    stack.name += " +fp8-params";
  }
  return stack;
}

Stack with_fp8_fsdp_all_gather(Stack stack, Fp8FsdpAllGather gather) {
  if (stack.fp8_fsdp_all_gather != gather) {
    stack.fp8_fsdp_all_gather = gather;
    if (gather != Fp8FsdpAllGather::none) stack.fp8_params = false;  // exclusive
    stack.name += gather == Fp8FsdpAllGather::none      ? " -fp8-fsdp-all-gather"
                  : gather == Fp8FsdpAllGather::dynamic ? " +fp8-fsdp-all-gather"
                                                        : " +fp8-fsdp-all-gather-precomputed";
  }
  return stack;
}

Stack with_fused_loss(Stack stack) {
  if (stack.op_kernels.erase("loss") > 0) stack.name += " +fused-loss";
  return stack;
}

bool runs_fused_loss(const Stack& stack) {
  return !stack.op_kernels.contains("loss");
}

Stack with_ep_dispatch(Stack stack, EpDispatch dispatch) {
  if (stack.ep_dispatch != dispatch) {
    stack.ep_dispatch = dispatch;
    stack.name += " +" + std::string(name_of(dispatch));
  }
  return stack;
}

Stack with_pipeline_split(Stack stack, PipelineSplit split) {
  stack.pipeline_split = split;
  return stack;
}

Stack with_cp_comm(Stack stack, CpComm comm) {
  stack.cp_comm = comm;
  return stack;
}

RecomputePolicy recompute_policy(const Stack& stack, std::string_view name) {
  if (const auto* p = stack.policy(name)) return *p;
  // none / selective / full: the stack's first policy of that mode.
  if (const auto mode = parse_recompute(name))
    if (const auto* p = stack.policy_for(*mode)) return *p;
  if (name == "none") return RecomputePolicy{"none", "no recomputation", Recompute::none, {}, {}};
  std::vector<std::string> names;
  for (const auto& p : stack.recompute) names.push_back(p.name);
  throw Error("", "--recompute",
              fmt::format("stack '{}' has no policy '{}' (its policies: {})", stack.name, name,
                          fmt::join(names, ", ")));
}

RecomputePolicy module_policy(const Stack& stack, const std::vector<std::string>& modules,
                              const std::string& where) {
  if (stack.recompute_modules.empty())
    throw Error("", where, "stack '" + stack.name + "' has no recompute modules");
  std::vector<std::string> names;
  for (const auto& module : stack.recompute_modules) names.push_back(module.first);
  const auto known = fmt::format("{}", fmt::join(names, ", "));
  if (modules.empty()) throw Error("", where, "names no module (the stack's: " + known + ")");
  RecomputePolicy p;
  p.mode = Recompute::selective;
  p.name = "selective";
  for (const auto& m : modules) {
    const auto it = stack.recompute_modules.find(m);
    if (it == stack.recompute_modules.end())
      throw Error("", where,
                  "stack '" + stack.name + "' has no recompute module '" + m +
                      "' (its modules: " + known + ")");
    if (std::ranges::find(p.modules, m) != p.modules.end())
      throw Error("", where, "module '" + m + "' is given twice");
    p.modules.push_back(m);
    p.units.insert(p.units.end(), it->second.begin(), it->second.end());
  }
  p.description = fmt::format("--recompute-modules {}", fmt::join(p.modules, " "));
  return p;
}

std::vector<std::string> idle_module_notes(const Stack& stack,
                                           const std::vector<std::string>& modules,
                                           const ModelSpec& model) {
  std::vector<std::string> notes;
  for (const auto& m : modules) {
    const auto it = stack.recompute_modules.find(m);
    if (it == stack.recompute_modules.end() || acts_on(model, it->second)) continue;
    std::vector<std::string> needs;
    for (const auto& u : it->second) needs.push_back(u.needs);
    notes.push_back(
        fmt::format("recompute module '{}' acts on no layer of {} (its regions need {})", m,
                    model.name, fmt::join(needs, " or ")));
  }
  return notes;
}

Stack with_recompute_modules(Stack stack, const std::vector<std::string>& modules,
                             const std::string& where) {
  auto policy = module_policy(stack, modules, where);
  auto& ps = stack.recompute;
  const auto it = std::ranges::find(ps, Recompute::selective, &RecomputePolicy::mode);
  if (it != ps.end()) {
    policy.name = it->name;
    *it = std::move(policy);
  } else {
    ps.insert(ps.begin(), std::move(policy));
  }
  return stack;
}

}  // namespace meshsim
