#include "strategy/comm_model.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace meshsim {
namespace {

int algo_key(const std::optional<CollectiveAlgo>& a) {
  return a ? static_cast<int>(*a) : -1;
}

// The plan with the algorithm and protocol NCCL's tuner would pick for this group alone.
std::optional<CollectivePlan> chosen_plan(const Topology& topo, Router& router,
                                          CollectiveCostCache& cache, PricingScratch& scratch,
                                          const CollectiveCall& call,
                                          std::optional<CollectiveAlgo> algo) {
  const auto priced = price_collective(topo, router, call, algo, &cache, &scratch);
  return plan_collective(topo, router, call, priced.algo, priced.protocol);
}

CollectivePlan scaled(CollectivePlan plan, double fraction) {
  if (fraction == 1.0) return plan;
  plan.latency = Time::from_seconds_ceil(plan.latency.seconds() * fraction);
  for (auto& phase : plan.phases)
    for (auto& f : phase) f.bytes *= fraction;
  return plan;
}

bool trivial(const CollectiveCall& c) {
  return c.bytes <= 0 || (c.op != CollectiveOp::send_recv && c.ranks.size() < 2);
}

}  // namespace

FoldedComm::FoldedComm(const Topology& topo, const Placement& placement, CommContext& context,
                       std::size_t max_copies)
    : topo_(topo), placement_(placement), ctx_(context), max_copies_(max_copies) {}

std::vector<std::vector<std::int32_t>> FoldedComm::copies(const CommRequest& r) {
  const auto& rep = r.call.ranks;
  std::vector<std::vector<std::int32_t>> out{rep};
  if (r.kind == GroupKind::pp) {
    // The same pair of stages in every pipeline.
    const auto src = placement_.coord_of(rep[0]), dst = placement_.coord_of(rep[1]);
    auto& pipes = groups_[GroupKind::pp];
    if (pipes.empty()) pipes = placement_.all_groups(GroupKind::pp);
    for (const auto& p : pipes) {
      std::vector<std::int32_t> pair{p[static_cast<std::size_t>(src.pp)],
                                     p[static_cast<std::size_t>(dst.pp)]};
      if (pair != rep && out.size() < max_copies_) out.push_back(std::move(pair));
    }
    return out;
  }
  auto& all = groups_[r.kind];
  if (all.empty()) all = placement_.all_groups(r.kind);
  const auto it = std::find(all.begin(), all.end(), rep);
  const std::size_t start = it == all.end() ? 0 : static_cast<std::size_t>(it - all.begin());
  for (std::size_t i = 1; i < all.size() && out.size() < max_copies_; ++i)
    out.push_back(all[(start + i) % all.size()]);
  return out;
}

Time FoldedComm::price(const CommRequest& r) {
  if (trivial(r.call)) return Time::zero();
  const auto key = std::make_tuple(static_cast<int>(r.kind), static_cast<int>(r.call.op),
                                   r.call.ranks, r.call.bytes, algo_key(r.algo), r.fraction);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  const auto best =
      price_collective(topo_, ctx_.router, r.call, r.algo, &ctx_.alone, &ctx_.scratch);
  auto& sim = ctx_.scratch.sim;
  const Time start = sim.now();
  Time rep_end = start;
  std::vector<CollectivePlan> plans;
  for (const auto& ranks : copies(r)) {
    CollectiveCall call = r.call;
    call.ranks = ranks;
    auto plan = plan_collective(topo_, ctx_.router, call, best.algo, best.protocol);
    if (!plan)
      throw Error("", "",
                  "collective plan failed for a copy of " + std::string(name_of(r.call.op)));
    plans.push_back(scaled(std::move(*plan), r.fraction));
  }
  for (std::size_t i = 0; i < plans.size(); ++i)
    run_collective(ctx_.scratch.net, sim, plans[i], [&sim, &rep_end, i] {
      if (i == 0) rep_end = sim.now();
    });
  sim.run();
  Time t = rep_end - start;
  if (ctx_.calibration)
    t = calibrated_collective_time(*ctx_.calibration, topo_, r.call, best.time, t);
  cache_.emplace(key, t);
  return t;
}

OpId FoldedComm::add(OpGraph& g, StreamId s, std::string name, const CommRequest& r,
                     std::vector<OpId> deps) {
  return g.add_op(s, std::move(name), price(r), std::move(deps));
}

FullComm::FullComm(const Topology& topo, Simulator& sim, FlowNetwork& net, CommContext& context)
    : topo_(topo), sim_(sim), net_(net), ctx_(context) {}

std::shared_ptr<const CollectivePlan> FullComm::plan_for(const CommRequest& r) {
  const auto key = std::make_tuple(static_cast<int>(r.call.op), r.call.ranks, r.call.bytes,
                                   algo_key(r.algo), r.fraction);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  auto plan = chosen_plan(topo_, ctx_.router, ctx_.alone, ctx_.scratch, r.call, r.algo);
  if (!plan) throw Error("", "", "no plan for " + std::string(name_of(r.call.op)));
  auto p = std::make_shared<const CollectivePlan>(scaled(std::move(*plan), r.fraction));
  plans_.emplace(key, p);
  return p;
}

OpId FullComm::add(OpGraph& g, StreamId s, std::string name, const CommRequest& r,
                   std::vector<OpId> deps) {
  if (trivial(r.call)) return g.add_op(s, std::move(name), Time::zero(), std::move(deps));
  auto plan = plan_for(r);
  const std::size_t members = r.sender_only ? 1 : r.call.ranks.size();
  auto key = std::make_pair(r.call.ranks, r.instance);
  return g.add_async_op(
      s, std::move(name),
      [this, plan, members, key](OpId, OpDone done) {
        auto& p = pending_[key];
        p.dones.push_back(std::move(done));
        if (p.dones.size() < members) return;
        auto dones = std::make_shared<std::vector<OpDone>>(std::move(p.dones));
        pending_.erase(key);
        run_collective(net_, sim_, *plan, [dones] {
          for (auto& d : *dones) d();
        });
      },
      std::move(deps));
}

}  // namespace meshsim
