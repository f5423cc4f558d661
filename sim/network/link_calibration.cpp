#include "network/link_calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "core/physical_limits.hpp"
#include "network/link_efficiency.hpp"

namespace meshsim {

const CollectiveCalibration* LinkCalibration::find(CollectiveOp op, std::int32_t ranks,
                                                   std::int32_t nodes) const {
  for (const auto& c : collectives)
    if (c.op == op && c.ranks == ranks && c.nodes == nodes) return &c;
  return nullptr;
}

double modelled_p2p_Bps(const Topology& topo, Router& router, std::int32_t a, std::int32_t b) {
  const auto& route = router.gpu_route(a, b);
  double time_per_byte = 0;
  for (const auto& path : route.paths) {
    double bottleneck = std::numeric_limits<double>::infinity();
    for (auto e : path.edges) {
      const auto& l = topo.link(e);
      bottleneck = std::min(bottleneck, l.bandwidth_Bps * payload_efficiency(l.kind));
    }
    time_per_byte = std::max(time_per_byte, path.fraction / bottleneck);
  }
  return time_per_byte > 0 ? 1.0 / time_per_byte : 0;
}

namespace {

// The first GPU pair whose route's first hop is a link of `kind` (inter-node kinds: the first
// pair on different nodes whose route crosses one).
std::optional<std::pair<std::int32_t, std::int32_t>> pair_over(const Topology& topo, Router& router,
                                                               LinkKind kind) {
  const auto n = static_cast<std::int32_t>(topo.gpu_count());
  const bool fabric = kind == LinkKind::infiniband || kind == LinkKind::ethernet;
  for (std::int32_t b = 1; b < std::min(n, 4096); ++b) {
    const bool other_node = topo.vertex(topo.gpus()[0]).node !=
                            topo.vertex(topo.gpus()[static_cast<std::size_t>(b)]).node;
    if (fabric != other_node) continue;
    const auto& route = router.gpu_route(0, b);
    if (route.paths.empty()) continue;
    for (auto e : route.paths.front().edges)
      if (topo.link(e).kind == kind) return std::pair{0, b};
    if (!fabric) break;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> apply_p2p_calibration(Topology& topo, const LinkCalibration& cal) {
  std::vector<std::string> lines;
  for (const auto& c : cal.p2p) {
    if (c.regimes.empty()) continue;
    Router router(topo);
    const auto pair = pair_over(topo, router, c.kind);
    if (!pair) {
      lines.push_back(fmt::format("{} calibration not applied: no GPU pair joined by {} links",
                                  name_of(c.kind), name_of(c.kind)));
      continue;
    }
    const double model = modelled_p2p_Bps(topo, router, pair->first, pair->second);
    const double measured = c.regimes.back().bandwidth_Bps;
    const double factor = measured / model;
    topo.scale_links_of_kind(c.kind, factor);
    lines.push_back(
        fmt::format("{} links scaled by {:.3f}: GPU copy {:.1f} GB/s modelled, "
                    "{:.1f} GB/s measured",
                    name_of(c.kind), factor, model / 1e9, measured / 1e9));
  }
  return lines;
}

std::int32_t nodes_spanned(const Topology& topo, const std::vector<std::int32_t>& ranks) {
  std::set<std::int32_t> nodes;
  for (auto r : ranks) nodes.insert(topo.vertex(topo.gpus()[static_cast<std::size_t>(r)]).node);
  return static_cast<std::int32_t>(nodes.size());
}

Time calibrated_collective_time(const LinkCalibration& cal, const Topology& topo,
                                const CollectiveCall& call, Time model_alone, Time t) {
  // A measured fit is NCCL's collective; a deduplicating dispatcher's all-to-all (DeepEP,
  // network share < 1) is another kernel moving fewer bytes, and keeps the model's price.
  if (cal.collectives.empty() || model_alone <= Time::zero() || call.network_share < 1.0) return t;
  const auto* fit = cal.find(call.op, static_cast<std::int32_t>(call.ranks.size()),
                             nodes_spanned(topo, call.ranks));
  if (!fit || fit->regimes.empty()) return t;
  const double measured = regime_seconds(fit->regimes, call.bytes);
  const double factor = measured / model_alone.seconds();
  return Time::from_seconds_ceil(t.seconds() * factor);
}

Json regimes_json(const std::vector<AlphaBetaRegime>& regimes) {
  Json out = Json::array();
  for (const auto& r : regimes) {
    Json j = {{"min_bytes", r.min_bytes},
              {"alpha_us", r.alpha_s * 1e6},
              {"GBps", r.bandwidth_Bps / 1e9},
              {"points", r.points},
              {"max_relative_error", r.max_relative_error}};
    if (std::isfinite(r.max_bytes)) j["max_bytes"] = r.max_bytes;
    out.push_back(j);
  }
  return out;
}

Json to_json(const LinkCalibration& c) {
  Json p2p = Json::array(), coll = Json::array();
  for (const auto& p : c.p2p)
    p2p.push_back({{"class", std::string(name_of(p.kind))}, {"regimes", regimes_json(p.regimes)}});
  for (const auto& x : c.collectives)
    coll.push_back({{"op", std::string(name_of(x.op))},
                    {"ranks", x.ranks},
                    {"nodes", x.nodes},
                    {"regimes", regimes_json(x.regimes)}});
  return {{"p2p", p2p}, {"collectives", coll}};
}

namespace {

std::vector<AlphaBetaRegime> read_regimes(const JsonRef& ref) {
  std::vector<AlphaBetaRegime> out;
  for (const auto& e : ref.non_empty_array()) {
    ObjectReader r(e);
    AlphaBetaRegime g;
    g.min_bytes = r.required("min_bytes").non_negative_number();
    if (auto v = r.optional("max_bytes")) {
      g.max_bytes = v->positive_number();
      if (g.max_bytes <= g.min_bytes) v->fail("must exceed min_bytes");
    }
    g.alpha_s = r.required("alpha_us").number_in(0, kMaxLatency_s * 1e6) * 1e-6;
    g.bandwidth_Bps = r.required("GBps").positive_at_most(kMaxBandwidth_GBps) * 1e9;
    if (auto v = r.optional("points")) g.points = static_cast<int>(v->positive_integer());
    if (auto v = r.optional("max_relative_error")) g.max_relative_error = v->non_negative_number();
    r.finish();
    if (!out.empty() && g.min_bytes != out.back().max_bytes)
      e.fail("regimes must tile the sizes: min_bytes must equal the previous max_bytes");
    out.push_back(g);
  }
  if (out.front().min_bytes != 0) ref.element(0).fail("the first regime must start at 0 bytes");
  if (std::isfinite(out.back().max_bytes))
    ref.element(out.size() - 1).fail("the last regime must be unbounded (no max_bytes)");
  return out;
}

}  // namespace

LinkCalibration read_link_calibration(const JsonRef& ref) {
  LinkCalibration c;
  ObjectReader r(ref);
  if (auto p = r.optional("p2p"))
    for (const auto& e : p->array()) {
      ObjectReader pr(e);
      P2pCalibration x;
      const auto cls = pr.required("class");
      const auto kind = parse_link_kind(cls.string());
      if (!kind) cls.fail("unknown link class '" + cls.string() + "'");
      x.kind = *kind;
      x.regimes = read_regimes(pr.required("regimes"));
      pr.finish();
      c.p2p.push_back(std::move(x));
    }
  if (auto p = r.optional("collectives"))
    for (const auto& e : p->array()) {
      ObjectReader cr(e);
      CollectiveCalibration x;
      const auto op = cr.required("op");
      const auto parsed = parse_collective_op(op.string());
      if (!parsed) op.fail("unknown collective '" + op.string() + "'");
      x.op = *parsed;
      const auto ranks = cr.required("ranks");
      x.ranks = static_cast<std::int32_t>(ranks.positive_integer());
      if (x.ranks > (1 << 20)) ranks.fail("is implausibly large");
      if (auto v = cr.optional("nodes")) {
        x.nodes = static_cast<std::int32_t>(v->positive_integer());
        if (x.nodes > x.ranks) v->fail("cannot exceed ranks");
      }
      x.regimes = read_regimes(cr.required("regimes"));
      cr.finish();
      c.collectives.push_back(std::move(x));
    }
  r.finish();
  return c;
}

}  // namespace meshsim
