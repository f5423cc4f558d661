#include "strategy/comm_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "core/error.hpp"
#include "core/rng.hpp"

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
    : topo_(topo),
      placement_(placement),
      ctx_(context),
      max_copies_(max_copies),
      f_(context.folded) {}

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

const GroupLayout& FoldedComm::layout(const std::vector<std::int32_t>& ranks) {
  // A group's layout (its members per node, the class of its intra-node routes) depends on the
  // ranks alone, and the same groups are planned at every size and by every layout of a mesh.
  // Bounded like the flow table: past 2^16 groups it starts over.
  if (auto it = f_.layouts.find(ranks); it != f_.layouts.end()) return it->second;
  if (f_.layouts.size() >= (std::size_t{1} << 16)) f_.layouts.clear();
  return f_.layouts.emplace(ranks, layout_of(topo_, ctx_.router, ranks)).first->second;
}

std::optional<LinkedPlan> FoldedComm::linked_plan_of(const CollectiveCall& call,
                                                     CollectiveAlgo algo, Protocol protocol) {
  // The links come from the cache when this copy was planned before at any size or protocol;
  // the plan's bytes and latency are worked out without routing. Both come from the same planner
  // in the same flow order, so the plan is the one planned with its flows.
  const FoldedPrices::LinksKey key{call.ranks, static_cast<int>(call.op), static_cast<int>(algo)};
  const auto& group = layout(call.ranks);
  std::shared_ptr<const FoldedPrices::PlanLinks> links;
  if (ctx_.shared) {
    links = ctx_.shared->find_links(key);
  } else if (const auto it = f_.plan_links.find(key); it != f_.plan_links.end()) {
    links = it->second;
  }
  if (links) {
    auto plan = plan_collective(topo_, ctx_.router, call, group, algo, protocol, nullptr, false);
    if (!plan) return std::nullopt;
    if (plan->phases.size() != links->size())
      throw std::logic_error("collective plan: phases differ with and without flows");
    for (std::size_t ph = 0; ph < links->size(); ++ph)
      if (plan->phases[ph].size() != (*links)[ph].size())
        throw std::logic_error("collective plan: flows differ with and without links");
    return LinkedPlan{std::move(*plan), std::move(links)};
  }
  auto plan = plan_collective(topo_, ctx_.router, call, group, algo, protocol, nullptr, true);
  if (!plan) return std::nullopt;
  auto planned = std::make_shared<FoldedPrices::PlanLinks>();
  std::size_t uses = 0;
  for (auto& phase : plan->phases) {
    auto& out = planned->emplace_back();
    for (auto& f : phase) {
      uses += f.links.size();
      out.push_back(std::move(f.links));
      f.links.clear();
    }
  }
  if (ctx_.shared) {
    ctx_.shared->insert_links(key, planned);
  } else {
    if (f_.plan_link_uses > (std::size_t{16} << 20)) {
      f_.plan_links.clear();
      f_.plan_link_uses = 0;
    }
    f_.plan_links.emplace(key, planned);
    f_.plan_link_uses += uses;
  }
  return LinkedPlan{std::move(*plan), std::move(planned)};
}

std::optional<CollectivePlan> FoldedComm::plan_of(const CollectiveCall& call, CollectiveAlgo algo,
                                                  Protocol protocol) {
  auto linked = linked_plan_of(call, algo, protocol);
  if (!linked) return std::nullopt;
  auto& plan = linked->plan;
  for (std::size_t ph = 0; ph < plan.phases.size(); ++ph)
    for (std::size_t k = 0; k < plan.phases[ph].size(); ++k)
      plan.phases[ph][k].links = (*linked->links)[ph][k];
  return std::move(plan);
}

std::vector<LinkedPlan> FoldedComm::linked_plans_of(const FoldedPrices::Priced& p) {
  std::vector<LinkedPlan> plans;
  for (const auto& ranks : copies(p.request)) {
    CollectiveCall call = p.request.call;
    call.ranks = ranks;
    auto plan = linked_plan_of(call, p.algo, p.protocol);
    // A copy laid out unlike the representative (on GB200 racks of 72 GPUs, a TP group of 16
    // across two racks beside groups inside one) may not admit its algorithm or protocol (NVLS,
    // hierarchical, LL128): it runs the first pair that plans, in enumeration order, the
    // representative's protocol first. Deterministic, and only its links matter here.
    for (auto proto : {p.protocol, Protocol::simple, Protocol::ll128, Protocol::ll})
      for (auto a : kAllCollectiveAlgos)
        if (!plan) plan = linked_plan_of(call, a, proto);
    if (!plan)
      throw Error(
          "", "",
          "collective plan failed for a copy of " + std::string(name_of(p.request.call.op)));
    plan->plan = scaled(std::move(plan->plan), p.request.fraction);
    plans.push_back(std::move(*plan));
  }
  return plans;
}

std::vector<CollectivePlan> FoldedComm::plans_of(const FoldedPrices::Priced& p) {
  std::vector<CollectivePlan> plans;
  for (auto& linked : linked_plans_of(p)) {
    auto& plan = plans.emplace_back(std::move(linked.plan));
    for (std::size_t ph = 0; ph < plan.phases.size(); ++ph)
      for (std::size_t k = 0; k < plan.phases[ph].size(); ++k)
        plan.phases[ph][k].links = (*linked.links)[ph][k];
  }
  return plans;
}

FoldedPrices::Key FoldedComm::key_of(const CommRequest& r) const {
  const auto& m = placement_.mesh();
  std::array<int, 4> order{};
  for (std::size_t d = 0; d < 4; ++d) order[d] = static_cast<int>(placement_.order()[d]);
  return {{m.dp, m.tp, m.pp, m.cp, m.ep},
          order,
          static_cast<int>(r.kind),
          static_cast<int>(r.call.op),
          r.call.ranks,
          r.call.bytes,
          r.call.network_share,
          algo_key(r.algo),
          r.fraction,
          ctx_.calibration,
          max_copies_};
}

Time FoldedComm::unloaded_price(const CommRequest& r) {
  if (trivial(r.call)) return Time::zero();
  // A measured fit scales the model's price (calibrated_collective_time), possibly below it;
  // not a deduplicating dispatcher's.
  if (const auto* cal = ctx_.calibration;
      cal && !cal->collectives.empty() && r.call.network_share >= 1.0) {
    const auto* fit = cal->find(r.call.op, static_cast<std::int32_t>(r.call.ranks.size()),
                                nodes_spanned(topo_, r.call.ranks));
    if (fit && !fit->regimes.empty()) return Time::zero();
  }
  auto key = key_of(r);
  if (const auto it = f_.unloaded.find(key); it != f_.unloaded.end()) return it->second;
  // The least over every algorithm and protocol `price` could pick (it picks by simulating each
  // alone, which this does not): each algorithm's flows once, at the simple protocol's wire
  // bytes; every protocol scales all of a plan's flows by its wire factor.
  const auto& group = layout(r.call.ranks);
  std::optional<Time> best;
  for (auto a : kAllCollectiveAlgos) {
    if (r.algo && a != *r.algo) continue;
    std::optional<double> flow_s;  // at wire factor `flow_wire`
    double flow_wire = 1.0;
    for (auto proto : {Protocol::simple, Protocol::ll128, Protocol::ll}) {
      auto plan = flow_s
                      ? plan_collective(topo_, ctx_.router, r.call, group, a, proto, nullptr, false)
                      : plan_of(r.call, a, proto);
      if (!plan) continue;
      plan = scaled(std::move(*plan), r.fraction);
      if (!flow_s) {
        double s = 0;
        for (const auto& phase : plan->phases) {
          double slowest = 0;
          for (const auto& f : phase) {
            double s_per_byte = 0;  // at its narrowest link
            for (const auto& u : f.links)
              s_per_byte = std::max(s_per_byte, u.weight / ctx_.scratch.net.capacity_Bps(u.link));
            slowest = std::max(slowest, f.bytes * s_per_byte);
          }
          s += slowest;
        }
        flow_s = s;
        flow_wire = plan->wire_factor;
      }
      // Rounded down, with room for the solver's rounding (a rate may come out an ulp above
      // capacity / weight, and a flow's end is rounded to the nearest tick within 1e-9).
      const double ticks = std::floor(*flow_s * plan->wire_factor / flow_wire * (1 - 1e-8) * 1e12);
      const Time t = plan->latency + Time::ps(static_cast<std::int64_t>(ticks));
      if (!best || t < *best) best = t;
    }
  }
  const Time t = best.value_or(Time::zero());
  if (f_.unloaded.size() >= (std::size_t{1} << 16)) f_.unloaded.clear();
  f_.unloaded.emplace(std::move(key), t);
  return t;
}

std::int32_t FoldedComm::index_of(const CommRequest& r) {
  if (trivial(r.call)) return -1;
  const auto key = key_of(r);
  if (auto it = f_.index.find(key); it != f_.index.end()) return it->second;
  FoldedPrices::Priced p;
  p.request = r;
  const auto shared = ctx_.shared ? ctx_.shared->find(key) : std::nullopt;
  std::optional<PricedCollective> best;
  if (shared) {
    p.algo = shared->algo;
    p.protocol = shared->protocol;
  } else {
    best = price_collective(topo_, ctx_.router, r.call, r.algo, &ctx_.alone, &ctx_.scratch);
    p.algo = best->algo;
    p.protocol = best->protocol;
  }
  const FoldedPrices::ShapeKey shape_key{std::get<0>(key),
                                         std::get<1>(key),
                                         std::get<2>(key),
                                         std::get<3>(key),
                                         r.call.ranks,
                                         static_cast<int>(p.algo),
                                         static_cast<int>(p.protocol),
                                         max_copies_};
  const auto known = f_.shape_index.find(shape_key);
  const auto i = static_cast<std::int32_t>(f_.priced.size());
  if (known == f_.shape_index.end()) {
    p.shape = static_cast<std::int32_t>(f_.shapes.size());
    f_.shape_index.emplace(shape_key, p.shape);
    f_.shapes.emplace_back().example = i;
  } else {
    p.shape = known->second;
  }
  if (shared) {
    p.alone = shared->alone;
    p.latency = shared->latency;
    p.price = shared->price;
    f_.priced.push_back(std::move(p));
    f_.index.emplace(key, i);
    return i;
  }
  const auto linked = linked_plans_of(p);
  p.latency = linked.front().plan.latency;
  // The same run at another pipeline stage (its copies wired alike) has the same signature, and
  // so does a layout that puts the same groups elsewhere: of the 13,400 prices of the Llama 3.1
  // 405B search on 16,384 GPUs, about 1,000 needed simulating. Smaller runs gain too: a hit costs
  // half a miss or less at every size measured.
  const auto& signature = run_signature(linked, ctx_.scratch);
  if (const auto run = ctx_.runs->find(signature)) {
    p.alone = *run;
  } else {
    const auto plans = dropped_plans(linked, ctx_.scratch);
    auto& sim = ctx_.scratch.sim;
    ctx_.scratch.net.renumber_flows();
    const Time start = sim.now();
    Time rep_end = start;
    for (std::size_t c = 0; c < plans.size(); ++c) {
      run_collective(ctx_.scratch.net, sim, plans[c], [&sim, &rep_end, c] {
        if (c == 0) rep_end = sim.now();
      });
    }
    sim.run();
    p.alone = rep_end - start;
    ctx_.runs->insert(signature, p.alone);
  }
  p.price = ctx_.calibration
                ? calibrated_collective_time(*ctx_.calibration, topo_, r.call, best->time, p.alone)
                : p.alone;
  if (ctx_.shared) ctx_.shared->insert(key, {p.algo, p.protocol, p.alone, p.latency, p.price});
  f_.priced.push_back(std::move(p));
  f_.index.emplace(key, i);
  return i;
}

std::size_t FoldedPrices::KeyHash::operator()(const Key& k) const {
  const auto& [mesh, order, kind, op, ranks, bytes, share, algo, fraction, calibration, copies] = k;
  std::uint64_t h = mix64(static_cast<std::uint64_t>(kind) * 64 + static_cast<std::uint64_t>(op));
  for (auto x : mesh) h = hash_combine(h, static_cast<std::uint64_t>(x));
  for (auto x : order) h = hash_combine(h, static_cast<std::uint64_t>(x));
  // The group by its size and up to eight evenly spaced members (a data-parallel group of 2,048
  // GPUs hashed whole cost 5 % of a search): groups of one kind differ in their first member
  // already; equal hashes still compare whole keys.
  h = hash_combine(h, ranks.size());
  const std::size_t stride = std::max<std::size_t>(1, ranks.size() / 8);
  for (std::size_t i = 0; i < ranks.size(); i += stride)
    h = hash_combine(h, static_cast<std::uint64_t>(ranks[i]));
  h = hash_combine(h, std::bit_cast<std::uint64_t>(bytes));
  h = hash_combine(h, std::bit_cast<std::uint64_t>(share));
  h = hash_combine(h, static_cast<std::uint64_t>(algo));
  h = hash_combine(h, std::bit_cast<std::uint64_t>(fraction));
  h = hash_combine(h, reinterpret_cast<std::uintptr_t>(calibration));
  return static_cast<std::size_t>(hash_combine(h, copies));
}

std::optional<SharedPrices::Value> SharedPrices::find(const FoldedPrices::Key& key) const {
  std::shared_lock lock(mutex_);
  const auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

void SharedPrices::insert(const FoldedPrices::Key& key, const Value& value) {
  std::unique_lock lock(mutex_);
  if (map_.size() >= kMaxEntries) map_.clear();
  map_.emplace(key, value);
}

std::shared_ptr<const FoldedPrices::PlanLinks> SharedPrices::find_links(
    const FoldedPrices::LinksKey& key) const {
  std::shared_lock lock(links_mutex_);
  const auto it = links_.find(key);
  return it == links_.end() ? nullptr : it->second;
}

void SharedPrices::insert_links(const FoldedPrices::LinksKey& key,
                                std::shared_ptr<const FoldedPrices::PlanLinks> links) {
  std::size_t uses = 0;
  for (const auto& phase : *links)
    for (const auto& f : phase) uses += f.size();
  std::unique_lock lock(links_mutex_);
  if (link_uses_ + uses > kMaxLinkUses) {
    links_.clear();
    link_uses_ = 0;
  }
  if (links_.emplace(key, std::move(links)).second) link_uses_ += uses;
}

Time FoldedComm::price(const CommRequest& r) {
  const auto i = index_of(r);
  return i < 0 ? Time::zero() : f_.priced[static_cast<std::size_t>(i)].price;
}

std::int32_t FoldedComm::collective_of(OpId op) const {
  return op.value < op_collective_.size() ? op_collective_[op.value] : -1;
}

void FoldedComm::mark(const std::vector<std::uint32_t>& links) {
  if (f_.mark.size() != topo_.directed_edge_count()) f_.mark.assign(topo_.directed_edge_count(), 0);
  ++f_.epoch;
  for (auto l : links) f_.mark[l] = f_.epoch;
}

bool FoldedComm::marked(const FlowLinks& links) const {
  return std::any_of(links.begin(), links.end(),
                     [&](const LinkUse& u) { return f_.mark[u.link] == f_.epoch; });
}

const std::vector<FoldedPrices::Phase>& FoldedComm::phases_of(std::int32_t shape) {
  auto& p = f_.shapes[static_cast<std::size_t>(shape)];
  if (!p.phases.empty()) return p.phases;
  if (!f_.solver) {
    f_.capacity.resize(topo_.directed_edge_count());
    for (std::uint32_t l = 0; l < f_.capacity.size(); ++l)
      f_.capacity[l] = ctx_.scratch.net.capacity_Bps(l);
    f_.solver.emplace(f_.capacity.size());
  }
  // Planned at one canonical size, so the rates (which do not depend on sizes) come out
  // bit-identical whichever collective of the shape was priced first.
  auto canonical = f_.priced[static_cast<std::size_t>(p.example)];
  canonical.request.call.bytes = 1 << 30;
  canonical.request.fraction = 1.0;
  const auto plans = plans_of(canonical);
  // Only the copies' flows that cross one of the representative's links compete with it
  // directly; the others (copies in other nodes, other pipeline stages) are left out of the
  // sharing solves, which keeps them small (their effect through third links is second order).
  p.rep_links.clear();
  for (const auto& phase : plans.front().phases)
    for (const auto& f : phase)
      for (const auto& use : f.links) p.rep_links.push_back(use.link);
  std::sort(p.rep_links.begin(), p.rep_links.end());
  p.rep_links.erase(std::unique(p.rep_links.begin(), p.rep_links.end()), p.rep_links.end());
  mark(p.rep_links);
  for (std::size_t ph = 0; ph < plans.front().phases.size(); ++ph) {
    FoldedPrices::Phase phase;
    phase.first = static_cast<std::uint32_t>(f_.flow_table.size());
    for (const auto& f : plans.front().phases[ph]) phase.rep_bytes.push_back(f.bytes);
    for (std::size_t c = 0; c < plans.size(); ++c) {
      if (ph >= plans[c].phases.size()) continue;  // a copy on another algorithm (above)
      for (const auto& f : plans[c].phases[ph]) {
        if (c > 0 && !marked(f.links)) continue;
        f_.flow_table.push_back(f.links);
        f_.flow_link_uses += f.links.size();
      }
    }
    phase.end = static_cast<std::uint32_t>(f_.flow_table.size());
    p.phases.push_back(std::move(phase));
  }
  for (auto& phase : p.phases) phase.alone_s = phase_s(phase, {});
  return p.phases;
}

double FoldedComm::phase_s(const FoldedPrices::Phase& phase,
                           const std::vector<std::uint32_t>& background) {
  f_.flows.clear();
  for (auto f = phase.first; f < phase.end; ++f) f_.flows.push_back(f);
  f_.flows.insert(f_.flows.end(), background.begin(), background.end());
  f_.rates.resize(f_.flow_table.size());
  f_.solver->solve(f_.flows, f_.flow_table, f_.capacity, f_.rates);
  double t = 0;
  for (std::size_t i = 0; i < phase.rep_bytes.size(); ++i)
    t = std::max(t, phase.rep_bytes[i] / f_.rates[phase.first + i]);
  return t;
}

double FoldedComm::share(std::int32_t self, std::vector<std::int32_t> others) {
  const auto& pa = f_.priced[static_cast<std::size_t>(self)];
  if (pa.alone <= pa.latency) return 1.0;
  std::vector<std::int32_t> key{pa.shape};
  for (auto o : others) key.push_back(f_.priced[static_cast<std::size_t>(o)].shape);
  std::sort(key.begin() + 1, key.end());
  auto it = f_.flow_rates.find(key);
  if (it == f_.flow_rates.end()) it = f_.flow_rates.emplace(key, flow_rate(key)).first;
  if (it->second >= 1.0) return 1.0;
  // The replay slows the whole op at one rate; its α term is not slowed.
  const double lat = pa.latency.seconds(), flows = (pa.alone - pa.latency).seconds();
  return (lat + flows) / (lat + flows / it->second);
}

double FoldedComm::flow_rate(const std::vector<std::int32_t>& shapes) {
  // The flow table grows with every shape shared across a search; past ~64 MB of link uses it
  // starts over (phases are rebuilt on demand, rates already worked out are kept).
  if (f_.flow_link_uses > (std::size_t{4} << 20)) {
    for (auto& sh : f_.shapes) sh.phases.clear();
    f_.flow_table.clear();
    f_.flow_link_uses = 0;
  }
  // Each neighbour, with all its copies, is on the links in its heaviest phase (a neighbour that
  // overlaps a shorter op does so mostly there); the op's phases are rated among the neighbours'
  // flows that cross its representative's links by max-min fairness at that instant, against
  // the same phases alone.
  const auto self = shapes.front();
  std::vector<std::uint32_t> background;
  for (std::size_t k = 1; k < shapes.size(); ++k) {
    const auto& phases = phases_of(shapes[k]);
    if (phases.empty()) continue;
    const auto heaviest =
        std::max_element(phases.begin(), phases.end(),
                         [](const FoldedPrices::Phase& x, const FoldedPrices::Phase& y) {
                           return x.alone_s < y.alone_s;
                         });
    for (auto f = heaviest->first; f < heaviest->end; ++f) background.push_back(f);
  }
  const auto& own = phases_of(self);
  mark(f_.shapes[static_cast<std::size_t>(self)].rep_links);
  std::erase_if(background, [&](std::uint32_t f) { return !marked(f_.flow_table[f]); });
  if (background.empty()) return 1.0;
  double t_alone = 0, t_shared = 0;
  for (const auto& phase : own) {
    t_alone += phase.alone_s;
    t_shared += phase_s(phase, background);
  }
  return t_shared > 0 && t_alone > 0 ? std::clamp(t_alone / t_shared, 1e-3, 1.0) : 1.0;
}

OpId FoldedComm::add(OpGraph& g, StreamId s, std::string_view name, const CommRequest& r,
                     std::span<const OpId> deps) {
  const auto i = index_of(r);
  const OpId id =
      g.add_op(s, name, i < 0 ? Time::zero() : f_.priced[static_cast<std::size_t>(i)].price, deps);
  if (op_collective_.size() <= id.value) op_collective_.resize(id.value + 1, -1);
  op_collective_[id.value] = i;
  return id;
}

FullComm::FullComm(const Topology& topo, Simulator& sim, FlowNetwork& net, CommContext& context)
    : topo_(topo), sim_(sim), net_(net), ctx_(context) {}

std::shared_ptr<const CollectivePlan> FullComm::plan_for(const CommRequest& r) {
  const auto key = std::make_tuple(static_cast<int>(r.call.op), r.call.ranks, r.call.bytes,
                                   r.call.network_share, algo_key(r.algo), r.fraction);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  auto plan = chosen_plan(topo_, ctx_.router, ctx_.alone, ctx_.scratch, r.call, r.algo);
  if (!plan) throw Error("", "", "no plan for " + std::string(name_of(r.call.op)));
  auto p = std::make_shared<const CollectivePlan>(scaled(std::move(*plan), r.fraction));
  plans_.emplace(key, p);
  return p;
}

OpId FullComm::add(OpGraph& g, StreamId s, std::string_view name, const CommRequest& r,
                   std::span<const OpId> deps) {
  if (trivial(r.call)) return g.add_op(s, name, Time::zero(), deps);
  auto plan = plan_for(r);
  const std::size_t members = r.sender_only ? 1 : r.call.ranks.size();
  auto key = std::make_pair(r.call.ranks, r.instance);
  return g.add_async_op(
      s, name,
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
      deps);
}

}  // namespace meshsim
