#include "search/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/memory_budget.hpp"
#include "parallel/mesh_rules.hpp"
#include "search/worker_pool.hpp"

namespace meshsim {

double total_exposed_s(const TrainingResult& r) {
  double s = 0;
  for (const auto& [g, v] : r.exposed_comm_s) s += v;
  return s;
}

std::vector<EvaluatedCandidate> evaluate_candidates(const Topology& topo, const ModelSpec& model,
                                                    const SearchJob& job,
                                                    const std::vector<Candidate>& candidates,
                                                    const SearchOptions& options) {
  std::vector<EvaluatedCandidate> out(candidates.size());
  std::size_t done = 0;
  std::mutex progress_mutex;
  const auto threads = options.threads > 0 ? static_cast<std::size_t>(options.threads) : 0;
  // Simulations that run at once share the memory budget (run_worker_pool's thread count).
  const std::size_t workers = std::min<std::size_t>(
      threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency()),
      std::max<std::size_t>(candidates.size(), 1));
  run_worker_pool(
      candidates.size(), threads,
      // Routes and prices shared by this worker's candidates.
      [&] { return std::make_unique<CommContext>(topo); },
      [&](std::unique_ptr<CommContext>& context, std::size_t i) {
        auto& e = out[i];
        e.candidate = candidates[i];
        TrainingSetup s;
        s.job = {job.seq, job.global_batch, e.candidate.micro_batch, job.dtype,
                 job.flash_attention};
        s.config = e.candidate.config;
        s.strategy = options.strategy;
        s.memory = options.memory;
        for (const auto& st : options.stacks)
          if (st.name == e.candidate.stack) {
            s.strategy.stack = st;
            s.memory.recipe = stack_recipe(st, job.dtype);
          }
        s.profile = options.profile;
        s.memory_budget_bytes = memory_budget_bytes() / static_cast<double>(workers);
        if (options.interrupted && options.interrupted->load()) {
          e.error = kNotSimulatedInterrupted;
          return;
        }
        if (options.deadline && std::chrono::steady_clock::now() >= *options.deadline) {
          e.error = kNotSimulatedBudget;
          return;
        }
        try {
          e.result = simulate_training(topo, model, s, context.get());
          e.result.trace = {};
          e.result.replay = {};
          // The enumeration checked memory with an even layer split; the simulated layout's
          // own stages are what must fit.
          if (e.result.memory.total() > topo.gpu.hbm_bytes.as_double())
            e.error =
                fmt::format("does not fit memory with its stage split ({:.1f} GB of {:.1f})",
                            e.result.memory.total() / 1e9, topo.gpu.hbm_bytes.as_double() / 1e9);
        } catch (const Error& err) {
          e.error = err.what();
        }
        if (options.progress) {
          std::lock_guard lock(progress_mutex);
          options.progress(++done, candidates.size());
        }
      });
  return out;
}

bool not_simulated(const EvaluatedCandidate& e) {
  return e.error == kNotSimulatedBudget || e.error == kNotSimulatedInterrupted;
}

void rank_results(std::vector<EvaluatedCandidate>& results) {
  std::stable_sort(results.begin(), results.end(), [](const auto& a, const auto& b) {
    if (a.error.empty() != b.error.empty()) return a.error.empty();
    if (!a.error.empty()) return a.candidate.label() < b.candidate.label();
    if (a.result.step_time_s != b.result.step_time_s)
      return a.result.step_time_s < b.result.step_time_s;
    const double ea = total_exposed_s(a.result), eb = total_exposed_s(b.result);
    if (ea != eb) return ea < eb;
    return a.candidate.label() < b.candidate.label();
  });
}

void apply_stack_policy(Candidate& c, const Stack& stack) {
  const auto* p =
      c.config.recompute == Recompute::none ? nullptr : stack.policy_for(c.config.recompute);
  c.config.recompute_ops = p ? p->ops : std::vector<std::string>{};
}

Enumeration enumerate_search(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                             const SearchSpace& space, const SearchOptions& options) {
  const auto gpus = static_cast<std::int64_t>(topo.gpus().size());
  if (options.stacks.empty()) {
    auto e = enumerate_candidates(model, job, gpus, topo.gpus_per_node(), topo.gpu, space,
                                  options.memory);
    for (auto& c : e.kept) apply_stack_policy(c, options.strategy.stack);
    return e;
  }
  Enumeration out;
  for (const auto& st : options.stacks) {
    MemoryOptions mo = options.memory;
    mo.recipe = stack_recipe(st, job.dtype);
    auto e = enumerate_candidates(model, job, gpus, topo.gpus_per_node(), topo.gpu, space, mo);
    for (auto& c : e.kept) {
      c.stack = st.name;
      apply_stack_policy(c, st);
    }
    out.total += e.total;
    for (const auto& [why, n] : e.rejected) out.rejected[why] += n;
    out.kept.insert(out.kept.end(), e.kept.begin(), e.kept.end());
  }
  return out;
}

SearchResult run_search(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                        const SearchSpace& space, const SearchOptions& options) {
  SearchResult r;
  r.enumeration = enumerate_search(topo, model, job, space, options);
  r.results = evaluate_candidates(topo, model, job, r.enumeration.kept, options);
  rank_results(r.results);
  return r;
}

namespace {

bool fits(const ModelSpec& model, const SearchJob& job, const Candidate& c, const GpuSpec& gpu,
          const MemoryOptions& memory) {
  try {
    check_mesh(model, c.config, {job.seq, job.global_batch, c.micro_batch, true});
  } catch (const Error&) {
    return false;
  }
  MemoryOptions mo = memory;
  mo.flash_attention = job.flash_attention;
  TrainingMemoryJob mj{job.seq, job.global_batch, c.micro_batch, job.dtype, {}};
  return worst_stage(training_memory_per_stage(model, mj, c.config, mo)).total() <=
         gpu.hbm_bytes.as_double();
}

}  // namespace

Candidate seed_heuristic(const ModelSpec& model, const SearchJob& job, std::int64_t gpus,
                         std::int64_t gpus_per_node, const GpuSpec& gpu,
                         const MemoryOptions& memory, std::string* why) {
  const std::int64_t nodes =
      std::max<std::int64_t>(gpus / std::max<std::int64_t>(gpus_per_node, 1), 1);
  auto make = [&](std::int64_t tp, std::int64_t pp, std::int64_t cp, std::int32_t zero) {
    Candidate c;
    c.config.mesh = {gpus / (tp * pp * cp), tp, pp, cp, 1};
    c.config.zero = zero;
    c.config.sp = tp > 1;
    return c;
  };
  // The largest TP inside a node that divides the heads.
  std::int64_t node_tp = std::min(gpus_per_node, gpus);
  while (node_tp > 1 && (model.heads % node_tp != 0 || gpus % node_tp != 0)) node_tp /= 2;
  if (nodes == 1) {
    for (std::int32_t zero : {0, 3}) {
      auto c = make(1, 1, 1, zero);
      if (fits(model, job, c, gpu, memory)) {
        if (why)
          *why = zero == 0 ? "one node: DDP (the model state fits on each GPU)"
                           : "one node: FSDP/ZeRO-3 (DDP does not fit)";
        return c;
      }
    }
    if (why) *why = "one node: TP across the node's GPUs with ZeRO-1 (FSDP alone does not fit)";
    return make(node_tp, 1, 1, 1);
  }
  std::int64_t cp = 1;
  if (nodes > 16 && job.seq >= 32768)
    while (cp < 8 && job.seq / (cp * 2) >= 16384 && gpus % (node_tp * cp * 2) == 0) cp *= 2;
  for (std::int64_t pp = 1; pp <= std::min<std::int64_t>(model.layers, gpus / (node_tp * cp));
       pp *= 2) {
    if (gpus % (node_tp * cp * pp) != 0) break;
    for (std::int32_t zero : {1, 3}) {
      if (nodes > 16 && zero == 3) continue;
      auto c = make(node_tp, pp, cp, zero);
      if (fits(model, job, c, gpu, memory)) {
        if (why)
          *why = nodes <= 16
                     ? "2–16 nodes: TP inside the node, ZeRO/FSDP across nodes, PP only if it "
                       "does not fit"
                     : "hundreds of GPUs: TP inside the node × PP × CP (long sequences) × DP";
        return c;
      }
    }
  }
  auto c = make(node_tp, 1, cp, 3);
  c.config.recompute = Recompute::full;
  if (why) *why = "nothing the heuristic tries fits; full recompute with ZeRO-3";
  return c;
}

}  // namespace meshsim
