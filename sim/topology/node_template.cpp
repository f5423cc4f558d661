#include "topology/node_template.hpp"

#include <fmt/format.h>

#include <map>

#include "core/enum_names.hpp"
#include "core/physical_limits.hpp"

namespace meshsim {
namespace {

// Exactly one of the given (key, scale) spellings must be present.
// `max_si` bounds the value in SI units (B/s, s); the error names it in the key's own unit.
double read_one_of(ObjectReader& r, std::initializer_list<std::pair<const char*, double>> keys,
                   bool allow_zero, double max_si, const char* what) {
  std::optional<double> value;
  std::string names;
  for (auto [key, scale] : keys) {
    names += (names.empty() ? "" : " / ") + std::string(key);
    if (auto v = r.optional(key)) {
      if (value) v->fail(std::string("give only one ") + what + " field");
      const double x = allow_zero ? v->non_negative_number() : v->positive_number();
      if (x > max_si / scale) v->fail(fmt::format("must be at most {:g}", max_si / scale));
      value = x * scale;
    }
  }
  if (!value) r.self().fail(std::string("missing ") + what + " (" + names + ")");
  return *value;
}

}  // namespace

std::string link_budget_error(std::int64_t links) {
  return fmt::format(
      "{} links is more than the supported {} (this would need ~{:.1f} GB at ~{:g} KB "
      "per link)",
      links, kMaxLinks, static_cast<double>(links) * kBytesPerLink / 1e9, kBytesPerLink / 1e3);
}

std::string vertex_budget_error(std::int64_t vertices) {
  return fmt::format("{} vertices is more than the supported {}", vertices, kMaxVertices);
}

LinkSpec read_link_spec(ObjectReader& r) {
  LinkSpec s;
  auto kind_ref = r.required("kind");
  auto kind = parse_link_kind(kind_ref.string());
  if (!kind)
    kind_ref.fail("unknown link kind '" + kind_ref.string() +
                  "' (known: " + joined_names(kAllLinkKinds) + ")");
  s.kind = *kind;
  s.bandwidth_Bps =
      read_one_of(r, {{"bandwidth_Bps", 1.0}, {"bandwidth_GBps", 1e9}, {"bandwidth_Gbps", 1e9 / 8}},
                  false, kMaxBandwidth_GBps * 1e9, "bandwidth");
  s.latency = Time::from_seconds_ceil(
      read_one_of(r, {{"latency_s", 1.0}, {"latency_us", 1e-6}, {"latency_ns", 1e-9}}, true,
                  kMaxLatency_s, "latency"));
  return s;
}

NodeTemplate read_node_template(ObjectReader& r, bool allow_node_field) {
  NodeTemplate t;
  std::map<std::string, std::vector<std::uint32_t>, std::less<>> groups;  // name → members
  std::map<std::string, std::uint32_t, std::less<>> singles;
  for (const auto& v : r.required("vertices").non_empty_array()) {
    ObjectReader vr(v);
    auto name_ref = vr.required("name");
    std::string name = name_ref.string();
    // Parametric nodes get an "n<k>/" prefix per copy, so '/' is reserved there.
    if (name.empty() || (!allow_node_field && name.find('/') != std::string::npos))
      name_ref.fail("vertex names must be non-empty and contain no '/'");
    auto kind_ref = vr.required("kind");
    auto kind = parse_vertex_kind(kind_ref.string());
    if (!kind)
      kind_ref.fail("unknown vertex kind '" + kind_ref.string() +
                    "' (known: " + joined_names(kAllVertexKinds) + ")");
    std::int32_t node = 0;
    if (allow_node_field) {
      if (auto n = vr.optional("node")) {
        const auto value = n->integer();
        // -1 marks a vertex that belongs to no node (a fabric switch).
        if (value < -1 || value > 1'000'000) n->fail("node index out of range (-1 for fabric)");
        node = static_cast<std::int32_t>(value);
      }
    }
    std::int64_t count = 1;
    const bool grouped = vr.has("count");
    if (auto c = vr.optional("count")) {
      count = c->positive_integer();
      if (count > 4096) c->fail("at most 4096 vertices per group");
    }
    if (static_cast<std::int64_t>(t.vertices.size()) + count > kMaxVertices)
      v.fail(vertex_budget_error(static_cast<std::int64_t>(t.vertices.size()) + count));
    vr.finish();
    if (groups.contains(name) || singles.contains(name))
      name_ref.fail("duplicate vertex name '" + name + "'");
    auto& members = groups[name];
    for (std::int64_t i = 0; i < count; ++i) {
      std::string member = grouped ? name + std::to_string(i) : name;
      if (grouped && (groups.contains(member) || singles.contains(member)))
        name_ref.fail("vertex name '" + member + "' is defined twice");
      const auto idx = static_cast<std::uint32_t>(t.vertices.size());
      t.vertices.push_back(TemplateVertex{*kind, member, node});
      members.push_back(idx);
      if (grouped) singles.emplace(member, idx);
    }
  }

  auto resolve = [&](const JsonRef& ref) -> const std::vector<std::uint32_t>& {
    const auto name = ref.string();
    if (auto g = groups.find(name); g != groups.end()) return g->second;
    if (auto s = singles.find(name); s != singles.end()) {
      // A member of a group: a group of one, kept alive in `groups` under its own name.
      return groups.emplace(name, std::vector<std::uint32_t>{s->second}).first->second;
    }
    ref.fail("unknown vertex '" + name + "'");
  };

  for (const auto& l : r.required("links").array()) {
    ObjectReader lr(l);
    auto a_ref = lr.required("a");
    auto b_ref = lr.required("b");
    const auto a = resolve(a_ref);  // copies: `resolve` may insert into `groups`
    const auto b = resolve(b_ref);
    std::string pattern = "map";
    JsonRef pattern_where = l;
    if (auto p = lr.optional("pattern")) {
      pattern = p->string();
      pattern_where = *p;
    }
    const LinkSpec spec = read_link_spec(lr);
    lr.finish();
    auto add = [&](std::uint32_t x, std::uint32_t y) {
      if (x == y) l.fail("link from vertex '" + t.vertices[x].name + "' to itself");
      t.links.push_back(TemplateLink{x, y, spec});
    };
    const auto made = static_cast<std::int64_t>(
        pattern == "all_pairs" ? a.size() * b.size() : std::max(a.size(), b.size()));
    if (static_cast<std::int64_t>(t.links.size()) + made > kMaxLinks)
      l.fail(link_budget_error(static_cast<std::int64_t>(t.links.size()) + made) +
             (pattern == "all_pairs" ? " (an all_pairs of " + std::to_string(a.size()) + " × " +
                                           std::to_string(b.size()) + ")"
                                     : ""));
    if (pattern == "all_pairs") {
      for (auto x : a)
        for (auto y : b) add(x, y);
    } else if (pattern == "map") {
      // Equal sizes pair up; otherwise the larger side is split into equal consecutive blocks,
      // one per member of the smaller side (gpu0,gpu1 → pcie0; gpu2,gpu3 → pcie1; ...).
      const auto& big = a.size() >= b.size() ? a : b;
      const auto& small = a.size() >= b.size() ? b : a;
      if (big.size() % small.size() != 0)
        l.fail("cannot map " + std::to_string(a.size()) + " vertices onto " +
               std::to_string(b.size()) +
               " (sizes must divide; or use \"pattern\": \"all_pairs\")");
      const auto block = big.size() / small.size();
      for (std::size_t i = 0; i < big.size(); ++i) add(big[i], small[i / block]);
    } else {
      pattern_where.fail("unknown pattern '" + pattern + "' (known: map, all_pairs)");
    }
  }
  return t;
}

std::vector<VertexId> instantiate(const NodeTemplate& t, Topology& topo, std::int32_t node,
                                  const std::string& prefix) {
  std::vector<VertexId> ids;
  ids.reserve(t.vertices.size());
  std::map<std::pair<std::int32_t, VertexKind>, std::int32_t> local;
  for (const auto& v : t.vertices) {
    const std::int32_t n = node + v.node;
    const std::int32_t index = local[{n, v.kind}]++;
    ids.push_back(topo.add_vertex(Vertex{v.kind, prefix + v.name, n, index, -1}));
  }
  for (const auto& l : t.links)
    topo.add_link(ids[l.a], ids[l.b], l.spec.kind, l.spec.bandwidth_Bps, l.spec.latency);
  return ids;
}

}  // namespace meshsim
