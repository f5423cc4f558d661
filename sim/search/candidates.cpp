#include "search/candidates.hpp"

#include <algorithm>
#include <tuple>

#include "core/error.hpp"
#include "model/op_catalogue.hpp"
#include "model/recompute.hpp"
#include "parallel/mesh_rules.hpp"
#include "strategy/pipeline_schedule.hpp"
#include "strategy/pipeline_split.hpp"

namespace meshsim {

std::string Candidate::label() const {
  const auto& m = config.mesh;
  return "tp=" + std::to_string(m.tp) + " pp=" + std::to_string(m.pp) +
         " cp=" + std::to_string(m.cp) + " dp=" + std::to_string(m.dp) +
         " ep=" + std::to_string(m.ep) + (m.fsdp > 0 ? " fsdp=" + std::to_string(m.fsdp) : "") +
         " zero=" + std::to_string(config.zero) + " " + to_string(config.schedule) +
         " mbs=" + std::to_string(micro_batch) +
         " recompute=" + std::string(name_of(config.recompute)) +
         (config.recompute_block > 0 ? "-block" + std::to_string(config.recompute_block) : "") +
         (config.recompute == Recompute::full && config.recompute_every > 1
              ? "-every" + std::to_string(config.recompute_every)
              : "") +
         (stack.empty() ? "" : " stack=" + stack);
}

namespace {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

bool allowed(const std::optional<std::int64_t>& pin, std::int64_t v) {
  return !pin || *pin == v;
}

// Whether the stack's selective policy stores less than no recompute on this model: Korthikanti's
// score tensors and a core-attention checkpoint free nothing with fused attention (it stores no
// scores), a policy that drops other tensors (torchtitan's op SAC, Megatron's moe_act) does.
bool selective_frees(const ModelSpec& model, const SearchJob& job, const Stack& stack) {
  const auto* p = stack.policy_for(Recompute::selective);
  if (!p) return false;
  const LayerShape shape{
      .micro_batch = 1, .seq = job.seq, .dtype = job.dtype, .flash_attention = job.flash_attention};
  for (const std::int64_t layer : {std::int64_t{0}, model.layers - 1})
    if (resolve_recompute(layer_ops(model, layer, shape, {}), p->units).freed_bytes > 0)
      return true;
  return false;
}

}  // namespace

void apply_stack_policy(Candidate& c, const Stack& stack) {
  const auto* p =
      c.config.recompute == Recompute::none ? nullptr : stack.policy_for(c.config.recompute);
  c.config.recompute_units = p ? p->units : std::vector<RecomputeUnit>{};
  c.config.recompute_modules = p ? p->modules : std::vector<std::string>{};
  c.config.recompute_every = p ? p->every : 1;
}

Enumeration enumerate_candidates(const ModelSpec& model, const SearchJob& job, std::int64_t gpus,
                                 std::int64_t gpus_per_node, const GpuSpec& gpu,
                                 const SearchSpace& space, const MemoryOptions& memory,
                                 const Stack& stack, bool tune_split) {
  if (!model.has_architecture())
    throw Error(
        model.file, "",
        "search needs an architecture; '" + model.name + "' is given by its parameter count only");
  const bool selective_dominated = job.flash_attention && !selective_frees(model, job, stack);
  // A global batch that is more than kMaxMicrobatches micro-batches per step on every layout
  // (the most data parallelism and the largest micro-batch) is an error of the flag, not a
  // search that rejects everything (issue 19: --gbs 2^30 allocated until killed).
  if (!space.micro_batches.empty()) {
    const auto mbs_max = *std::max_element(space.micro_batches.begin(), space.micro_batches.end());
    if (job.global_batch / gpus / mbs_max > kMaxMicrobatches)
      throw Error("", "--gbs",
                  "global batch " + std::to_string(job.global_batch) + " is more than " +
                      std::to_string(kMaxMicrobatches) +
                      " micro-batches per step on every layout (at most dp = " +
                      std::to_string(gpus) + " × micro-batch " + std::to_string(mbs_max) + ")");
  }
  Enumeration e;
  auto reject = [&](const std::string& why) { ++e.rejected[why]; };
  const double capacity = gpu.hbm_bytes.as_double();
  for (auto tp : divisors(gpus)) {
    for (auto cp : divisors(gpus / tp)) {
      for (auto pp : divisors(gpus / (tp * cp))) {
        const std::int64_t dp = gpus / (tp * cp * pp);
        std::vector<std::int64_t> eps{1};
        if (model.moe) eps = divisors(dp * cp);
        for (auto ep : eps) {
          for (auto mbs : space.micro_batches) {
            // Schedules: no pipeline, or 1F1B, interleaved with 2 chunks, zero bubble.
            std::vector<Schedule> schedules{{ScheduleKind::one_f_one_b, 1}};
            if (pp > 1) {
              schedules.push_back({ScheduleKind::interleaved, 2});
              schedules.push_back({ScheduleKind::zero_bubble, 1});
            }
            // A pinned schedule replaces them where it runs: 1F1B anywhere, the overlapped 1F1B
            // without PP, the others (any interleaving, GPipe, zero bubble) with PP. Elsewhere
            // the defaults stay, to be counted as differing from the pin.
            if (space.schedule) {
              const auto k = space.schedule->kind;
              if (k == ScheduleKind::one_f_one_b ||
                  (k == ScheduleKind::one_f_one_b_overlap ? pp == 1 : pp > 1))
                schedules = {*space.schedule};
            }
            for (const auto& sched : schedules) {
              // Per (layout, schedule, mbs), the Pareto frontier of (recompute, ZeRO stage):
              // a fitting pair is dominated by another fitting pair with no more recompute and
              // no more sharding (less compute and less communication for the same layout).
              std::int32_t lowest_zero = 4;       // lowest fitting stage with less recompute
              std::int32_t lowest_zero_none = 4;  // ... with none
              for (Recompute rc : kAllRecompute) {
                bool found = false;
                for (std::int32_t zero = 0; zero <= 3; ++zero) {
                  ++e.total;
                  Candidate c;
                  c.micro_batch = mbs;
                  auto& cfg = c.config;
                  cfg.mesh = {dp, tp, pp, cp, ep};
                  cfg.zero = zero;
                  cfg.sp = tp > 1;
                  cfg.recompute = rc;
                  cfg.schedule = sched;
                  if (!allowed(space.tp, tp) || !allowed(space.pp, pp) || !allowed(space.cp, cp) ||
                      !allowed(space.dp, dp) || !allowed(space.ep, ep) ||
                      !allowed(space.mbs, mbs) || (space.zero && *space.zero != zero) ||
                      (space.recompute && *space.recompute != rc) ||
                      (space.schedule && *space.schedule != sched)) {
                    reject("pinned dimension differs");
                    continue;
                  }
                  if (!stack.runs_zero(zero)) {
                    reject("ZeRO stage the stack does not run");
                    continue;
                  }
                  // Megatron-LM: no zero-bubble schedule; DeepSpeed: 1F1B only (Stack::schedules).
                  if (!stack.runs_schedule(schedule_family(sched))) {
                    reject("schedule the stack does not run");
                    continue;
                  }
                  if (tp > gpus_per_node && !space.allow_tp_across_nodes) {
                    reject("TP larger than a node");
                    continue;
                  }
                  if (cp > space.max_cp) {
                    reject("CP above the search limit");
                    continue;
                  }
                  // With fused attention a policy recomputing the scores stores and computes what
                  // none does.
                  if (rc == Recompute::selective && selective_dominated) {
                    reject("dominated (selective recompute with fused attention)");
                    continue;
                  }
                  if (job.global_batch / (dp * mbs) > kMaxMicrobatches) {
                    reject("more than 8192 micro-batches per step");
                    continue;
                  }
                  try {
                    check_mesh(model, cfg, {job.seq, job.global_batch, mbs, true, {}});
                  } catch (const Error&) {
                    reject("invalid (divisibility)");
                    continue;
                  }
                  const std::int64_t m = job.global_batch / (dp * mbs);
                  // Unpinned interleaving over micro-batches that are not a multiple of pp runs
                  // Megatron's smallest micro-batch group that takes them (label
                  // interleaved:V:G, --microbatch-group-size-per-virtual-pipeline-stage).
                  if (sched.kind == ScheduleKind::interleaved && !space.schedule && m % pp != 0)
                    cfg.schedule.group = smallest_microbatch_group(pp, m).value_or(0);
                  if (sched.kind == ScheduleKind::interleaved &&
                      (interleaving_error(cfg.schedule, pp, m) ||
                       pp * sched.virtual_stages > model.layers)) {
                    reject(
                        "invalid (interleaving needs Megatron's micro-batch count and a layer per "
                        "virtual stage)");
                    continue;
                  }
                  // Recomputing every N-th layer (N > 1) is not ordered against a selective
                  // policy: only no recompute dominates it (checked again once N is known).
                  const bool layer_frequency =
                      rc == Recompute::full && stack.recompute_layer_frequency;
                  if (found || zero >= (layer_frequency ? lowest_zero_none : lowest_zero)) {
                    reject("dominated (less ZeRO sharding or recompute already fits)");
                    continue;
                  }
                  apply_stack_policy(c, stack);
                  TrainingMemoryJob mj{job.seq, job.global_batch, mbs, job.dtype,
                                       framework_chunk_layers(stack.pipeline_split, model, cfg)};
                  MemoryOptions mo = memory;
                  mo.flash_attention = job.flash_attention;
                  const auto stages = training_memory_per_stage(model, mj, cfg, mo);
                  bool moved_layers = false;
                  if (worst_stage(stages).total() > capacity) {
                    // Where the split is tuned with the stack's end switches, a layout whose
                    // own split leaves a stage over memory is kept if one of theirs fits
                    // (simulate_training then runs the least busy that does). Such a split can
                    // be busier than the stack's own, so it dominates no other ZeRO stage or
                    // recompute policy of the layout.
                    auto moved =
                        tune_split && pp > 1
                            ? fitting_end_switch_split(
                                  stack.pipeline_split, model, pp * sched.virtual_stages,
                                  sched.virtual_stages,
                                  [&](const std::vector<std::int64_t>& chunk_layers) {
                                    TrainingMemoryJob j = mj;
                                    j.chunk_layers = chunk_layers;
                                    return stages_within(
                                        training_memory_per_stage(model, j, cfg, mo), capacity);
                                  })
                            : std::vector<std::int64_t>{};
                    if (moved.empty()) {
                      reject("does not fit memory");
                      continue;
                    }
                    mj.chunk_layers = std::move(moved);
                    moved_layers = true;
                  }
                  // Partial full recompute, as the stack offers it: the fewest layers of each
                  // chunk recomputed that still fit (memory only falls as more layers are).
                  const std::int64_t longest =
                      mj.chunk_layers.empty()
                          ? (model.layers + pp * sched.virtual_stages - 1) /
                                (pp * sched.virtual_stages)
                          : *std::max_element(mj.chunk_layers.begin(), mj.chunk_layers.end());
                  const auto fits = [&] {
                    return worst_stage(training_memory_per_stage(model, mj, cfg, mo)).total() <=
                           capacity;
                  };
                  // Megatron's block method: the first N layers, the smallest N.
                  if (rc == Recompute::full && stack.recompute_block && cfg.recompute_every == 1) {
                    std::int64_t lo = 1, hi = longest;  // `hi` fits: every layer recomputed
                    while (lo < hi) {
                      const auto mid = lo + (hi - lo) / 2;
                      cfg.recompute_block = static_cast<std::int32_t>(mid);
                      if (fits())
                        hi = mid;
                      else
                        lo = mid + 1;
                    }
                    cfg.recompute_block = lo < longest ? static_cast<std::int32_t>(lo) : 0;
                  }
                  // torchtitan's layer frequency: every N-th layer, the largest N.
                  if (layer_frequency && cfg.recompute_every == 1) {
                    std::int64_t lo = 1, hi = longest;  // `lo` fits: every layer recomputed
                    while (lo < hi) {
                      const auto mid = lo + (hi - lo + 1) / 2;
                      cfg.recompute_every = static_cast<std::int32_t>(mid);
                      if (fits())
                        lo = mid;
                      else
                        hi = mid - 1;
                    }
                    cfg.recompute_every = static_cast<std::int32_t>(lo);
                    if (lo == 1 && zero >= lowest_zero) {
                      reject("dominated (less ZeRO sharding or recompute already fits)");
                      continue;
                    }
                  }
                  if (moved_layers) {
                    ++e.moved_layers;
                  } else {
                    found = true;
                    lowest_zero = std::min(lowest_zero, zero);
                    if (rc == Recompute::none) lowest_zero_none = zero;
                  }
                  e.kept.push_back(c);
                  // HSDP: a layout that needs ZeRO-3 also runs with the smallest shard group
                  // (in DP ranks) that fits, replicated across the rest: its all-gathers and
                  // reduce-scatters span fewer ranks, plus one all-reduce of the shard per step.
                  if (zero == 3 && dp > 1 && !space.no_hsdp)
                    for (auto f : divisors(dp)) {
                      if (f < 2 || f == dp) continue;
                      ++e.total;
                      Candidate h = c;
                      h.config.mesh.fsdp = f;
                      if (worst_stage(training_memory_per_stage(model, mj, h.config, mo)).total() >
                          capacity) {
                        reject("HSDP shard group too small to fit");
                        continue;
                      }
                      e.kept.push_back(h);
                      break;
                    }
                }
              }
            }
          }
        }
      }
    }
  }
  return e;
}

}  // namespace meshsim
