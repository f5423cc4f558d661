#include "search/serving_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "search/worker_pool.hpp"

namespace meshsim {
namespace {

bool meets(const ServingResult& r, const ServingSetup& s) {
  return r.completed > 0 && (s.slo_ttft_s <= 0 || r.ttft.p99 <= s.slo_ttft_s) &&
         (s.slo_tpot_s <= 0 || r.tpot.p99 <= s.slo_tpot_s) && r.rejected == 0;
}

std::string label(const ServingCandidate& c) {
  return fmt::format("{} × tp={} pp={}", c.replicas, c.shape.tp, c.shape.pp);
}

// Better first: simulated; meeting the SLO; among those meeting it the lower mean end-to-end
// latency ("the fastest layout that meets the SLO"), among those missing it the higher goodput;
// fewer GPUs per replica (the simpler layout) on a tie.
bool better(const ServingCandidate& a, const ServingCandidate& b) {
  if (a.refused.empty() != b.refused.empty()) return a.refused.empty();
  if (a.meets_slo != b.meets_slo) return a.meets_slo;
  const auto& x = a.result;
  const auto& y = b.result;
  if (a.meets_slo) {
    if (x.e2e.mean != y.e2e.mean) return x.e2e.mean < y.e2e.mean;
  } else if (x.goodput_requests_per_s != y.goodput_requests_per_s) {
    return x.goodput_requests_per_s > y.goodput_requests_per_s;
  }
  return a.shape.gpus() < b.shape.gpus();
}

}  // namespace

ServingSearchResult search_serving(const Topology& topo, const ModelSpec& model,
                                   const ServingSetup& base, const std::vector<Request>& requests,
                                   std::int64_t gpus, std::size_t threads) {
  if (gpus < 1) throw Error("", "--gpus", "must be a positive integer");
  if (gpus > static_cast<std::int64_t>(topo.gpu_count()))
    throw Error("", "--gpus",
                fmt::format("{} GPUs asked; the cluster has {}", gpus, topo.gpu_count()));
  const std::int64_t node = std::max<std::int32_t>(topo.gpus_per_node(), 1);
  std::vector<ServingCandidate> cands;
  for (std::int64_t tp = 1; tp <= std::min(gpus, node); tp *= 2) {
    for (std::int64_t pp = 1; tp * pp <= gpus && pp <= model.layers; pp *= 2) {
      ServingCandidate c;
      c.shape = base.shape;
      c.shape.tp = tp;
      c.shape.pp = pp;
      c.replicas = gpus / (tp * pp);
      if (model.heads % tp != 0)
        c.refused = fmt::format("{} attention heads do not split over tp={}", model.heads, tp);
      cands.push_back(c);
    }
  }
  run_worker_pool(
      cands.size(), threads, [&] { return std::make_unique<CommContext>(topo); },
      [&](std::unique_ptr<CommContext>& ctx, std::size_t i) {
        auto& c = cands[i];
        if (!c.refused.empty()) return;
        ServingSetup s = base;
        s.shape = c.shape;
        s.replicas = c.replicas;
        s.prefill_replicas = s.decode_replicas = 0;
        s.record_iterations = false;
        try {
          c.result = simulate_serving(topo, model, s, requests, ctx.get());
          c.meets_slo = meets(c.result, s);
          // Per-request samples are not needed once ranked; keep the search's memory flat.
          c.result.ttft_samples.clear();
          c.result.tpot_samples.clear();
          c.result.e2e_samples.clear();
        } catch (const Error& e) {
          c.refused = e.detail();
        }
      });
  std::stable_sort(cands.begin(), cands.end(), better);

  ServingSearchResult out;
  out.candidates = std::move(cands);
  const ServingCandidate* sharded = nullptr;     // best with one replica
  const ServingCandidate* replicated = nullptr;  // best with several
  for (const auto& c : out.candidates) {
    if (!c.refused.empty()) continue;
    auto*& slot = c.replicas > 1 ? replicated : sharded;
    if (!slot) slot = &c;
  }
  const auto describe = [](const ServingCandidate& c) {
    return fmt::format("{} ({}goodput {:.2f} req/s, p99 TTFT {:.3f} s, p99 TPOT {:.1f} ms)",
                       label(c), c.meets_slo ? "meets the SLO, " : "misses the SLO, ",
                       c.result.goodput_requests_per_s, c.result.ttft.p99, 1e3 * c.result.tpot.p99);
  };
  if (replicated && sharded) {
    const bool replicas_win = better(*replicated, *sharded);
    out.verdict = fmt::format("{} beat {}: {} versus {}",
                              replicas_win ? "more replicas" : "a sharded replica",
                              replicas_win ? "sharding" : "more replicas",
                              describe(replicas_win ? *replicated : *sharded),
                              describe(replicas_win ? *sharded : *replicated));
  } else if (replicated) {
    out.verdict = "no single replica fits the budget's layouts; best: " + describe(*replicated);
  } else if (sharded) {
    out.verdict = "only one replica fits in the budget; best: " + describe(*sharded);
  } else {
    out.verdict = "no layout fits the model in the budget";
  }
  return out;
}

}  // namespace meshsim
