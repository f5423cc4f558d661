#include "search/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "compute/compute_model.hpp"
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

std::unique_ptr<CommContext> ContextPool::take() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) return std::make_unique<CommContext>(topo_, prices_);
  auto c = std::move(free_.back());
  free_.pop_back();
  return c;
}

void ContextPool::give(std::unique_ptr<CommContext> c) {
  std::lock_guard lock(mutex_);
  free_.push_back(std::move(c));
}

TrainingSetup setup_of(const Candidate& c, const SearchJob& job, const SearchOptions& options) {
  TrainingSetup s;
  s.job = {job.seq, job.global_batch, c.micro_batch, job.dtype, job.flash_attention};
  s.config = c.config;
  s.strategy = options.strategy;
  s.memory = options.memory;
  for (const auto& st : options.stacks)
    if (st.name == c.stack) {
      s.strategy.stack = st;
      s.memory.recipe = stack_recipe(st, job.dtype);
    }
  s.profile = options.profile;
  return s;
}

double candidate_lower_bound_s(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                               const Candidate& c, const SearchOptions& options,
                               CommContext* context, BoundLevel level) {
  auto s = setup_of(c, job, options);
  // The tuned split simulate_training runs: the least busy that fits memory.
  if (s.strategy.tune_split && !s.strategy.split_fits)
    s.strategy.split_fits = split_memory_check(model, s, topo.gpu.hbm_bytes.as_double());
  const ComputeModel cm(topo.gpu, s.profile);
  const double compute_only = step_time_lower_bound(model, s.job, s.config, cm, s.strategy);
  if (s.config.mesh.world() != static_cast<std::int64_t>(topo.gpus().size())) return compute_only;
  // The layer passes as chains with their collectives, priced as simulate_training prices them
  // (its placement, folded model and calibration), in a context whose prices the simulation
  // then reuses. A layout the folded model cannot price fails its simulation the same way; its
  // bound stays the compute-only one.
  std::optional<CommContext> own;
  if (!context) context = &own.emplace(topo);
  context->calibration = s.profile ? &s.profile->links : nullptr;
  try {
    const Placement placement(s.config.mesh, s.rank_order);
    FoldedComm comm(topo, placement, *context);
    return std::max(compute_only, step_time_lower_bound(model, s.job, s.config, placement, cm, comm,
                                                        s.strategy, level));
  } catch (const Error&) {
    return compute_only;
  }
}

namespace {

// The TP degrees among `candidates`, ascending (the same on every MPI rank).
std::vector<std::int64_t> tp_degrees(const std::vector<Candidate>& candidates) {
  std::set<std::int64_t> tps;
  for (const auto& c : candidates) tps.insert(c.config.mesh.tp);
  return {tps.begin(), tps.end()};
}

// A worker's context: leased from the pool for the call, or its own.
struct Lease {
  std::shared_ptr<ContextPool> pool;
  std::unique_ptr<CommContext> context;
  Lease(std::shared_ptr<ContextPool> p, const Topology& topo) : pool(std::move(p)) {
    context = pool ? pool->take() : std::make_unique<CommContext>(topo);
  }
  Lease(Lease&&) = default;
  Lease& operator=(Lease&&) = default;
  ~Lease() {
    if (pool && context) pool->give(std::move(context));
  }
};

}  // namespace

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
  const double budget_per_worker = memory_budget_bytes() / static_cast<double>(workers);
  run_worker_pool(
      candidates.size(), threads,
      // Routes and prices shared by this worker's candidates (and, pooled, by later rounds').
      [&] { return Lease(options.contexts, topo); },
      [&](Lease& lease, std::size_t i) {
        auto& context = lease.context;
        auto& e = out[i];
        e.candidate = candidates[i];
        TrainingSetup s = setup_of(e.candidate, job, options);
        s.memory_budget_bytes = budget_per_worker;
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

BoundedEvaluation evaluate_top_k(
    const Topology& topo, const ModelSpec& model, const SearchJob& job,
    const std::vector<Candidate>& candidates, const SearchOptions& options,
    const std::function<std::vector<EvaluatedCandidate>(const std::vector<Candidate>&,
                                                        const SearchOptions&)>& evaluate,
    const std::function<double(double)>& agree, const std::string& anchor) {
  BoundedEvaluation out;
  if (options.top_k == 0) {
    out.results = evaluate(candidates, options);
    return out;
  }
  // Bounds: cheap (kernel prices of two layers and the ends, each stage's layer passes with their
  // collectives), computed on the pool's threads with the contexts the simulations then use. The
  // data-parallel streams' part, which prices the widest groups, only for the candidates that
  // reach a round (below).
  std::vector<double> bound(candidates.size());
  const auto threads = options.threads > 0 ? static_cast<std::size_t>(options.threads) : 0;
  const auto bound_all = [&](const std::vector<std::size_t>& which, BoundLevel level) {
    run_worker_pool(
        which.size(), threads, [&] { return Lease(options.contexts, topo); },
        [&](Lease& lease, std::size_t k) {
          const auto i = which[k];
          bound[i] =
              std::max(bound[i], candidate_lower_bound_s(topo, model, job, candidates[i], options,
                                                         lease.context.get(), level));
        });
  };
  std::vector<std::size_t> order(candidates.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  bound_all(order, BoundLevel::chains);
  // Best bound first; the anchor (the seed heuristic's layout) goes first: its step time also
  // bounds what must be simulated, so that its rank is exact. Sorted again whenever bounds
  // were sharpened (they only rise).
  const auto sort_order = [&] {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return bound[a] < bound[b]; });
    for (std::size_t k = 0; k < order.size(); ++k)
      if (!anchor.empty() && candidates[order[k]].label() == anchor) {
        std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k),
                    order.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        break;
      }
  };
  sort_order();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::size_t round = std::max<std::size_t>(2 * options.top_k, 32);
  std::vector<double> best;                    // simulated step times, ascending
  std::map<std::int64_t, double> best_per_tp;  // the search also prints the best of each TP
  double kth = kInf, anchor_s = 0;
  // A candidate must be simulated while it could still be in the top K, be the best of its TP
  // degree, or be faster than the anchor.
  auto limit = [&](std::size_t i) {
    const auto tp = candidates[i].config.mesh.tp;
    const auto it = best_per_tp.find(tp);
    const double tp_best = it == best_per_tp.end() ? kInf : it->second;
    // The anchor and the TP degree's best count while within reach of the K-th best (kth only
    // falls, so once out they stay out).
    const double anchor_limit = anchor_s <= kAnchorReach * kth ? anchor_s : 0.0;
    return std::max({kth, std::min(tp_best, kAnchorReach * kth), anchor_limit});
  };
  auto needed = [&](std::size_t i) { return !(bound[i] > limit(i)); };
  const auto cut = [&] {
    const bool mine = (options.interrupted && options.interrupted->load()) ||
                      (options.deadline && std::chrono::steady_clock::now() >= *options.deadline);
    return agree(mine ? 1.0 : 0.0) > 0;
  };
  const auto tps = tp_degrees(candidates);
  std::vector<bool> taken(candidates.size(), false);
  std::vector<BoundLevel> level(candidates.size(), BoundLevel::chains);
  std::vector<std::pair<std::size_t, EvaluatedCandidate>> done;
  for (;;) {
    std::vector<std::size_t> batch;
    std::size_t still_needed = 0;
    for (auto i : order)
      if (!taken[i] && needed(i)) {
        ++still_needed;
        if (batch.size() < round) batch.push_back(i);
      }
    if (batch.empty()) break;
    // A round's candidates get the rest of their bound first, a level at a time (unloaded,
    // then full); after each raise the round is chosen again from the new order (limits only
    // fall, so one left out stays out). The first round too: the chains alone miss the widest
    // groups' traffic, and a round of ZeRO-3 layouts on thousands of GPUs whose gathers take
    // twice the compute would be simulated for nothing (Llama 3.1 405B on 16,384 GPUs: 30 of
    // the first 32, 9 to 48 s against a winner of 5.7). Past the time budget, or once
    // interrupted, nothing more is raised (the full level prices the widest groups, seconds per
    // round at 16,384 GPUs): the rounds left only mark their candidates not simulated. Decided
    // on rank 0's clock, so every MPI rank picks the same rounds.
    std::vector<std::size_t> raise;
    auto next = BoundLevel::unloaded;
    for (auto i : batch)
      if (level[i] == BoundLevel::chains) raise.push_back(i);
    if (raise.empty()) {
      next = BoundLevel::full;
      for (auto i : batch)
        if (level[i] == BoundLevel::unloaded) raise.push_back(i);
    }
    if (!raise.empty() && !cut()) {
      bound_all(raise, next);
      for (auto i : raise) level[i] = next;
      (next == BoundLevel::full ? out.sharpened : out.unloaded) += raise.size();
      sort_order();
      continue;
    }
    std::vector<Candidate> cs;
    for (auto i : batch) {
      taken[i] = true;
      cs.push_back(candidates[i]);
    }
    // Progress over the whole search: simulated so far of simulated + still needed (the total
    // shrinks as the bounds leave candidates out).
    SearchOptions round_options = options;
    if (options.progress)
      round_options.progress = [&, before = done.size(), still_needed](std::size_t d, std::size_t) {
        options.progress(before + d, before + still_needed);
      };
    auto results = evaluate(cs, round_options);  // empty on MPI ranks other than 0
    // What every rank agrees on: the K-th best, each TP degree's best and the anchor's time
    // (rank 0's), in a fixed order.
    std::map<std::int64_t, double> tp_mine = best_per_tp;
    double anchor_mine = anchor_s;
    for (std::size_t k = 0; k < results.size(); ++k) {
      if (results[k].error.empty()) {
        const double t = results[k].result.step_time_s;
        best.push_back(t);
        const auto tp = results[k].candidate.config.mesh.tp;
        tp_mine[tp] = std::min(tp_mine.contains(tp) ? tp_mine[tp] : kInf, t);
        if (!anchor.empty() && results[k].candidate.label() == anchor) anchor_mine = t;
      }
      done.emplace_back(batch[k], std::move(results[k]));
    }
    std::sort(best.begin(), best.end());
    kth = agree(best.size() >= options.top_k ? best[options.top_k - 1] : kInf);
    anchor_s = agree(anchor_mine);
    for (auto tp : tps) {
      const auto it = tp_mine.find(tp);
      const double v = agree(it == tp_mine.end() ? kInf : it->second);
      if (v < kInf) best_per_tp[tp] = v;
    }
  }
  for (bool t : taken) out.bounded_out += !t;
  // A TP degree's best is exact unless one of its layouts left out has a bound below it.
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (taken[i]) continue;
    const auto tp = candidates[i].config.mesh.tp;
    const auto it = best_per_tp.find(tp);
    if (it != best_per_tp.end() && bound[i] > it->second) continue;
    auto [at, fresh] = out.tp_best_at_least.try_emplace(tp, bound[i]);
    if (!fresh) at->second = std::min(at->second, bound[i]);
  }
  out.anchor_rank_exact = anchor_s <= kAnchorReach * kth;
  std::sort(done.begin(), done.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [i, e] : done) out.results.push_back(std::move(e));
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

Enumeration enumerate_search(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                             const SearchSpace& space, const SearchOptions& options) {
  const auto gpus = static_cast<std::int64_t>(topo.gpus().size());
  if (options.stacks.empty()) {
    return enumerate_candidates(model, job, gpus, topo.gpus_per_node(), topo.gpu, space,
                                options.memory, options.strategy.stack,
                                options.strategy.tune_split);
  }
  Enumeration out;
  for (const auto& st : options.stacks) {
    MemoryOptions mo = options.memory;
    mo.recipe = stack_recipe(st, job.dtype);
    auto e = enumerate_candidates(model, job, gpus, topo.gpus_per_node(), topo.gpu, space, mo, st,
                                  options.strategy.tune_split);
    if (options.cp_only.contains(st.name))
      e.rejected[kSameWithoutCp] += static_cast<std::int64_t>(
          std::erase_if(e.kept, [](const Candidate& c) { return c.config.mesh.cp == 1; }));
    for (auto& c : e.kept) c.stack = st.name;
    out.total += e.total;
    for (const auto& [why, n] : e.rejected) out.rejected[why] += n;
    out.moved_layers += e.moved_layers;
    out.kept.insert(out.kept.end(), e.kept.begin(), e.kept.end());
  }
  return out;
}

SearchResult run_search(const Topology& topo, const ModelSpec& model, const SearchJob& job,
                        const SearchSpace& space, const SearchOptions& options) {
  SearchResult r;
  r.enumeration = enumerate_search(topo, model, job, space, options);
  SearchOptions opt = options;
  if (!opt.contexts) opt.contexts = std::make_shared<ContextPool>(topo);
  auto ev = evaluate_top_k(
      topo, model, job, r.enumeration.kept, opt,
      [&](const std::vector<Candidate>& cs, const SearchOptions& o) {
        return evaluate_candidates(topo, model, job, cs, o);
      },
      [](double kth) { return kth; }, "");
  r.results = std::move(ev.results);
  r.tp_best_at_least = std::move(ev.tp_best_at_least);
  if (ev.bounded_out > 0) r.enumeration.rejected[kBoundedOut] += ev.bounded_out;
  rank_results(r.results);
  return r;
}

namespace {

bool fits(const ModelSpec& model, const SearchJob& job, const Candidate& c, const GpuSpec& gpu,
          const MemoryOptions& memory) {
  try {
    check_mesh(model, c.config, {job.seq, job.global_batch, c.micro_batch, true, {}});
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
