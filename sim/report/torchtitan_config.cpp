#include "report/torchtitan_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "core/error.hpp"
#include "report/launch_config.hpp"

namespace meshsim {
namespace {

struct Value {
  std::string text;  // a string's contents, or the literal (number, boolean, array)
  bool quoted = false;
  int line = 0;
};

std::string trim(std::string_view s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string_view::npos) return "";
  const auto b = s.find_last_not_of(" \t\r");
  return std::string(s.substr(a, b - a + 1));
}

// The TOML that job configs use: [section] headers, key = "string" | integer | true/false |
// ["array"], # comments. Keys are "section.key".
std::map<std::string, Value> read_toml(std::string_view text, const std::string& where) {
  std::map<std::string, Value> out;
  std::string section;
  int number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++number;
    // A # outside a string starts a comment.
    std::string line;
    bool in_string = false;
    for (char c : raw) {
      if (c == '"') in_string = !in_string;
      if (c == '#' && !in_string) break;
      line += c;
    }
    line = trim(line);
    if (line.empty()) continue;
    auto fail = [&](const std::string& why) {
      throw Error("", where, fmt::format("line {}: {}", number, why));
    };
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3) fail("malformed section header '" + line + "'");
      section = trim(std::string_view(line).substr(1, line.size() - 2));
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) fail("expected key = value, got '" + line + "'");
    const auto key = trim(std::string_view(line).substr(0, eq));
    auto value = trim(std::string_view(line).substr(eq + 1));
    if (key.empty() || value.empty()) fail("expected key = value, got '" + line + "'");
    Value v{value, false, number};
    if (value.front() == '"') {
      if (value.size() < 2 || value.back() != '"') fail("unterminated string for " + key);
      v.text = value.substr(1, value.size() - 2);
      v.quoted = true;
    }
    const auto full = section.empty() ? key : section + "." + key;
    if (!out.emplace(full, v).second) fail(full + " is given twice");
  }
  return out;
}

class Keys {
 public:
  Keys(std::map<std::string, Value> keys, std::string where)
      : keys_(std::move(keys)), where_(std::move(where)) {}

  bool has(const std::string& k) const { return keys_.contains(k); }
  std::int64_t integer(const std::string& k, std::int64_t fallback, std::int64_t lo) {
    const auto it = find(k);
    if (it == keys_.end()) return fallback;
    std::int64_t v = 0;
    const auto& t = it->second.text;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (it->second.quoted || ec != std::errc() || end != t.data() + t.size() || v < lo ||
        v > (std::int64_t{1} << 40))
      fail(it, fmt::format("{} = {} is not an integer of at least {}", k, t, lo));
    return v;
  }
  std::string string(const std::string& k, const std::string& fallback) {
    const auto it = find(k);
    if (it == keys_.end()) return fallback;
    if (!it->second.quoted) fail(it, k + " must be a quoted string");
    return it->second.text;
  }
  bool boolean(const std::string& k, bool fallback) {
    const auto it = find(k);
    if (it == keys_.end()) return fallback;
    const auto& t = it->second.text;
    if (it->second.quoted || (t != "true" && t != "false"))
      fail(it, fmt::format("{} = {} is not true or false", k, t));
    return t == "true";
  }
  std::string literal(const std::string& k) {
    const auto it = find(k);
    return it == keys_.end() ? "" : it->second.text;
  }
  // A key that is read but has no effect here (not listed as ignored).
  void no_effect(const std::string& k) { read_.insert(k); }
  // An error at the line of key `k`, which is given.
  [[noreturn]] void fail(const std::string& k, const std::string& why) { fail(find(k), why); }
  [[noreturn]] void fail(std::map<std::string, Value>::const_iterator it,
                         const std::string& why) const {
    throw Error("", where_, fmt::format("line {}: {}", it->second.line, why));
  }
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : keys_)
      if (!read_.contains(k)) out.push_back(k);
    return out;
  }

 private:
  std::map<std::string, Value>::const_iterator find(const std::string& k) {
    read_.insert(k);
    return keys_.find(k);
  }
  std::map<std::string, Value> keys_;
  std::string where_;
  std::set<std::string> read_;
};

}  // namespace

TorchtitanConfig parse_torchtitan_toml(std::string_view text, std::int64_t world,
                                       std::int64_t layers, const std::string& where) {
  Keys k(read_toml(text, where), where);
  TorchtitanConfig out;
  out.model_name = k.string("model.name", "");
  out.flavor = k.string("model.flavor", "");
  auto& c = out.layout.config;
  const auto tp = k.integer("parallelism.tensor_parallel_degree", 1, 1);
  const auto pp = k.integer("parallelism.pipeline_parallel_degree", 1, 1);
  const auto cp = k.integer("parallelism.context_parallel_degree", 1, 1);
  const auto ep = k.integer("parallelism.expert_parallel_degree", 1, 1);
  const auto replicate = k.integer("parallelism.data_parallel_replicate_degree", 1, 1);
  // torchtitan's default shard degree, -1, takes the GPUs the other degrees leave.
  auto shard = k.integer("parallelism.data_parallel_shard_degree", -1, -1);
  if (shard == 0) throw Error("", where, "data_parallel_shard_degree must be -1 or positive");
  if (shard == -1) {
    const auto rest = tp * pp * cp * replicate;
    if (world % rest != 0)
      throw Error("", where,
                  fmt::format("data_parallel_shard_degree = -1, and tp·pp·cp·replicate = {} "
                              "does not divide the cluster's {} GPUs",
                              rest, world));
    shard = world / rest;
  }
  c.mesh = parse_mesh(
      fmt::format("dp={},tp={},pp={},cp={},ep={}{}", replicate * shard, tp, pp, cp, ep,
                  replicate > 1 && shard > 1 ? fmt::format(",fsdp={}", shard) : std::string()),
      where);
  if (c.mesh.world() != world)
    throw Error(
        "", where,
        fmt::format("the degrees make {} ranks, the cluster has {} GPUs", c.mesh.world(), world));
  // FSDP2 when anything is sharded: ZeRO-3, its reshard_after_forward as configured.
  c.zero = shard > 1 ? 3 : 0;
  const auto reshard = k.string("parallelism.fsdp_reshard_after_forward", "default");
  if (reshard != "default" && reshard != "always" && reshard != "never")
    throw Error("", where,
                "fsdp_reshard_after_forward '" + reshard + "': expected default, always or never");
  // "default" reshards after forward unless PP is on (torchtitan apply_fsdp: with PP, per
  // micro-batch all-gathers would not overlap; software-stacks.md §1.2).
  c.reshard_after_forward = reshard == "always" || (reshard == "default" && pp == 1);
  c.sp = tp > 1;  // torchtitan's TP plan is always sequence-parallel

  static const std::map<std::string, ScheduleKind, std::less<>> kSchedules = {
      {"GPipe", ScheduleKind::gpipe},
      {"1F1B", ScheduleKind::one_f_one_b},
      {"Interleaved1F1B", ScheduleKind::interleaved},
      {"InterleavedZeroBubble", ScheduleKind::zero_bubble},
      {"ZBVZeroBubble", ScheduleKind::zero_bubble}};
  const auto schedule = k.string("parallelism.pipeline_parallel_schedule", "1F1B");
  const auto sk = kSchedules.find(schedule);
  if (sk == kSchedules.end())
    throw Error("", where,
                "pipeline_parallel_schedule '" + schedule +
                    "': meshsim models GPipe, 1F1B, Interleaved1F1B and the zero-bubble ones");
  c.schedule.kind = sk->second;
  // The stage split (torchtitan/distributed/pipeline_parallel.py): the layers plus the first
  // and last stage's weights (pipeline_parallel_first/last_stage_less_layers, 1 by default) split
  // evenly over the stages, generate_llm_fqn_per_model_part. pipeline_parallel_layers_per_stage
  // sets the stages: ceil(units / per), a multiple of pp; one a rank on single-stage schedules
  // (GPipe, 1F1B), at least two on Interleaved1F1B, whose default is two.
  const bool weights_given = k.has("parallelism.pipeline_parallel_first_stage_less_layers") ||
                             k.has("parallelism.pipeline_parallel_last_stage_less_layers");
  const auto less_layers = [&](const std::string& key) {
    const auto v = k.integer(key, 1, 0);
    if (v > kMaxEndWeight)
      k.fail(key, fmt::format("{} = {}: meshsim weighs an end at most {} layers", key, v,
                              kMaxEndWeight));
    return static_cast<std::int32_t>(v);
  };
  const PipelineSplit split{PipelineSplitMethod::even,
                            less_layers("parallelism.pipeline_parallel_first_stage_less_layers"),
                            less_layers("parallelism.pipeline_parallel_last_stage_less_layers")};
  if (weights_given) out.layout.stack.pipeline_split = split;
  if (pp > 1 && k.has("parallelism.pipeline_parallel_layers_per_stage")) {
    const auto per = k.integer("parallelism.pipeline_parallel_layers_per_stage", 1, 1);
    const std::int64_t units = layers + split.embedding_layers + split.loss_layers;
    const std::int64_t stages = (units + per - 1) / per;
    if (stages % pp != 0)
      throw Error("", where,
                  fmt::format("pipeline_parallel_layers_per_stage {} makes {} stages of {} layers "
                              "(with the ends' weights), not a multiple of pp {}",
                              per, stages, units, pp));
    const std::int64_t per_rank = stages / pp;
    const bool multi = sk->second == ScheduleKind::interleaved;
    if (sk->second != ScheduleKind::zero_bubble && (multi ? per_rank < 2 : per_rank != 1))
      throw Error("", where,
                  fmt::format("pipeline_parallel_layers_per_stage {} gives {} stages a rank; {} "
                              "runs {}",
                              per, per_rank, schedule, multi ? "at least two" : "one"));
    if (multi) c.schedule.virtual_stages = per_rank;
  } else if (sk->second == ScheduleKind::interleaved) {
    c.schedule.virtual_stages = 2;  // torchtitan's default for interleaved schedules
  }
  const auto mode = k.string("activation_checkpoint.mode", "selective");  // torchtitan's default
  if (auto r = parse_recompute(mode))
    c.recompute = *r;
  else
    throw Error("", where,
                "activation_checkpoint.mode '" + mode + "': expected none, selective or full");
  // Selective: "op" (torchtitan's default) is op-SAC; a positive integer N wraps every N-th
  // block in full AC (torchtitan/distributed/activation_checkpoint.py).
  const auto option = k.string("activation_checkpoint.selective_ac_option", "op");
  if (c.recompute != Recompute::selective) {
    k.no_effect("activation_checkpoint.selective_ac_option");
  } else if (option != "op") {
    const bool digits = !option.empty() && option.size() <= 4 &&
                        option.find_first_not_of("0123456789") == std::string::npos;
    const int every = digits ? std::stoi(option) : 0;
    if (every < 1)
      throw Error("", where,
                  "activation_checkpoint.selective_ac_option '" + option +
                      "': expected op or a positive integer");
    c.recompute = Recompute::full;
    c.recompute_every = every;
  }

  auto& j = out.layout.job;
  j.seq = k.integer("training.seq_len", 0, 1);
  const auto local = k.integer("training.local_batch_size", 1, 1);
  j.global_batch = k.integer("training.global_batch_size", local * c.mesh.dp, -1);
  if (j.global_batch == -1) j.global_batch = local * c.mesh.dp;  // torchtitan's -1 default
  j.micro_batch = pp > 1 ? k.integer("parallelism.pipeline_parallel_microbatch_size", 1, 1) : local;
  // Without PP the micro-batch is local_batch_size; the PP micro-batch size has no effect.
  if (pp == 1) k.no_effect("parallelism.pipeline_parallel_microbatch_size");
  if (j.global_batch < 1 || j.global_batch % (local * c.mesh.dp) != 0)
    throw Error("", where,
                fmt::format("global_batch_size {} is not a multiple of local_batch_size {} × the "
                            "data-parallel degree {}",
                            j.global_batch, local, c.mesh.dp));
  // With PP each gradient-accumulation step runs the schedule once over the local batch
  // (torchtitan/train.py), which must split into whole micro-batches (as torchtitan checks).
  if (pp > 1) {
    if (local % j.micro_batch != 0)
      k.fail("parallelism.pipeline_parallel_microbatch_size",
             fmt::format("local_batch_size {} is not a multiple of "
                         "pipeline_parallel_microbatch_size {}",
                         local, j.micro_batch));
    j.pipeline_steps = j.global_batch / (local * c.mesh.dp);
  }
  // Interleaved1F1B's rounds are Megatron's micro-batch groups (torchtitan_interleaved_group);
  // the local batch is whole micro-batches (checked above with PP; without it, one).
  if (c.schedule.kind == ScheduleKind::interleaved && c.schedule.virtual_stages > 1) {
    const auto n = local / j.micro_batch;
    const auto group = torchtitan_interleaved_group(n, pp);
    if (!group)
      throw Error("", where,
                  fmt::format("Interleaved1F1B runs {} micro-batches (local_batch_size / "
                              "pipeline_parallel_microbatch_size) in {} rounds, which do not "
                              "divide them (as torch.distributed.pipelining refuses)",
                              n, std::max<std::int64_t>(1, n / pp)));
    c.schedule.group = *group;
  }
  const auto precision = k.string("training.mixed_precision_param", "bfloat16");
  if (precision == "bfloat16")
    j.dtype = DType::bf16;
  else if (precision == "float16")
    j.dtype = DType::fp16;
  else if (precision == "float32")
    j.dtype = DType::fp32;
  else
    throw Error("", where,
                "mixed_precision_param '" + precision + "': expected bfloat16, float16 or float32");
  if (k.literal("model.converters").find("float8") != std::string::npos) {
    j.dtype = DType::fp8;
    // torchtitan's [float8] recipe_name (unset: tensorwise). The torchtitan stacks price
    // torchao's tensorwise dynamic scaling (their fp8_casts); rowwise scales are not modelled.
    const auto recipe = k.string("float8.recipe_name", "tensorwise");
    if (recipe != "tensorwise")
      k.fail("float8.recipe_name", "recipe_name '" + recipe +
                                       "': meshsim models torchao's tensorwise Float8 only "
                                       "(rowwise scaling has no stack form)");
    // The routed experts stay 16-bit (Stack::fp8_routed_experts) unless torchao's float8 MoE
    // prototype is asked for, which scales rowwise, like the recipe refused above.
    if (const auto moe = k.literal("float8.moe_fqns_prototype"); !moe.empty() && moe != "[]")
      k.fail("float8.moe_fqns_prototype",
             "moe_fqns_prototype: torchao's float8 MoE training (rowwise scaling) is not "
             "modelled; without it the routed experts run in 16 bits, as the torchtitan stacks "
             "price them");
    // torchao's float8 all-gather under FSDP, its scales computed per weight in each
    // pre-all-gather hook or all at once after the optimizer (torchtitan's Float8 converter
    // precomputes only with the float8 all-gather on). Said only where the config has the keys
    // (unset: the stack's own, off in the torchtitan stacks as in torchtitan).
    const std::string enable = "float8.enable_fsdp_float8_all_gather",
                      precompute = "float8.precompute_float8_dynamic_scale_for_fsdp";
    if (k.has(enable) || k.has(precompute)) {
      const bool on = k.boolean(enable, false), precomputed = k.boolean(precompute, false);
      out.layout.stack.fp8_fsdp_all_gather = !on           ? Fp8FsdpAllGather::none
                                             : precomputed ? Fp8FsdpAllGather::precomputed
                                                           : Fp8FsdpAllGather::dynamic;
    }
  }

  // The stack: torch.compile per block ([compile] enable, or [training] compile before torchtitan
  // moved it), whose components default to the model and the loss (a compiled loss is the
  // catalogue's fused kernel); async TP needs compile (torchtitan refuses it without).
  const bool compiled = k.boolean("compile.enable", false) || k.boolean("training.compile", false);
  out.layout.stack.name = compiled ? "torchtitan-compile" : "torchtitan";
  if (compiled && k.has("compile.enable")) {
    const auto components = k.literal("compile.components");
    out.layout.stack.fused_loss =
        components.empty() || components.find("\"loss\"") != std::string::npos;
  }
  if (k.boolean("parallelism.enable_async_tensor_parallel", false)) {
    if (!compiled)
      k.fail("parallelism.enable_async_tensor_parallel",
             "enable_async_tensor_parallel needs torch.compile ([compile] enable)");
    out.layout.stack.tp_overlap = true;
  }
  // CP's K/V exchange (torchtitan/config/job_config.py, Parallelism; torchtitan_rotate_method).
  const auto rotate = k.string("parallelism.context_parallel_rotate_method",
                               std::string(torchtitan_rotate_method(CpComm::allgather)));
  for (const auto comm : kAllCpComm)
    if (torchtitan_rotate_method(comm) == rotate) out.layout.stack.cp_comm = comm;
  if (!out.layout.stack.cp_comm)
    k.fail("parallelism.context_parallel_rotate_method",
           "context_parallel_rotate_method '" + rotate + "': expected allgather or alltoall");
  out.ignored = k.unread();
  return out;
}

}  // namespace meshsim
