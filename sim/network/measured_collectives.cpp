#include "network/measured_collectives.hpp"

#include <fmt/format.h>

#include <array>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "core/error_stats.hpp"
#include "core/json_reader.hpp"
#include "core/median.hpp"
#include "network/collective_runner.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::array<const char*, 4> kBands{"< 1 MiB", "1–16 MiB", "16–64 MiB", "≥ 64 MiB"};

std::string layout_of(std::size_t gpus, std::int32_t nodes) {
  return fmt::format("{} GPUs, {} node{}", gpus, nodes, nodes == 1 ? "" : "s");
}

// A cluster file loaded once, with its router (and the router's route cache) for every row on it.
struct Cluster {
  explicit Cluster(Topology t) : topo(std::move(t)), router(topo) {}
  Topology topo;
  Router router;
};

}  // namespace

std::string MeasuredCollective::layout() const {
  return layout_of(ranks.size(), nodes);
}

std::string collective_size_band(double bytes) {
  if (bytes < kMiB) return kBands[0];
  if (bytes < 16 * kMiB) return kBands[1];
  if (bytes < 64 * kMiB) return kBands[2];
  return kBands[3];
}

std::vector<MeasuredCollective> price_measured_collectives(const std::string& path,
                                                           const std::string& root) {
  const Json doc = load_json_file(path);
  ObjectReader top(JsonRef::root(doc, path));
  top.required("notes").array();
  const auto rows_ref = top.required("rows").non_empty_array();
  top.finish();
  std::map<std::pair<std::string, std::int32_t>, std::unique_ptr<Cluster>> clusters;
  std::vector<MeasuredCollective> out;
  for (const auto& ref : rows_ref) {
    ObjectReader r(ref);
    MeasuredCollective m;
    m.system = r.required("system").string();
    const auto op_ref = r.required("op");
    const auto op = parse_collective_op(op_ref.string());
    if (!op) op_ref.fail("unknown collective '" + op_ref.string() + "'");
    m.op = *op;
    m.topology = r.required("topology").file_name();
    m.nodes = static_cast<std::int32_t>(r.required("nodes").integer_in(1, 1024));
    m.bytes = r.required("bytes").positive_number();
    m.measured_s = r.required("measured_us").positive_number() * 1e-6;
    r.required("std_us").non_negative_number();
    const auto ranks_ref = r.required("ranks");
    r.finish();
    const auto key = std::pair{m.topology, m.nodes};
    if (!clusters.contains(key)) {
      TopologyOptions opt;
      opt.nodes = m.nodes;
      clusters.emplace(
          key, std::make_unique<Cluster>(load_topology(root + "/topologies/" + m.topology, opt)));
    }
    Cluster& cluster = *clusters.at(key);
    const Topology& topo = cluster.topo;
    std::set<std::int64_t> seen;
    for (const auto& g : ranks_ref.non_empty_array()) {
      const auto gpu = g.integer_in(0, static_cast<std::int64_t>(topo.gpu_count()) - 1);
      if (!seen.insert(gpu).second) g.fail(fmt::format("GPU {} appears twice", gpu));
      m.ranks.push_back(static_cast<std::int32_t>(gpu));
    }
    if (m.ranks.size() < 2) ranks_ref.fail("a collective needs at least two ranks");
    const auto priced =
        price_collective(topo, cluster.router, {m.op, m.ranks, m.bytes}, std::nullopt);
    m.predicted_s = priced.time.seconds();
    m.chosen = fmt::format("{}/{}", name_of(priced.algo), name_of(priced.protocol));
    out.push_back(std::move(m));
  }
  return out;
}

std::string measured_collectives_markdown(const std::vector<MeasuredCollective>& rows,
                                          const std::string& preamble) {
  // (system, op, GPUs, nodes) → band → errors and the price's choices.
  using Key = std::tuple<std::string, std::string, std::size_t, std::int32_t>;
  struct Band {
    std::vector<double> errors;
    std::map<std::string, int> chosen;
  };
  std::map<Key, std::map<std::string, Band>> groups;
  for (const auto& r : rows) {
    const Key key{r.system, std::string(name_of(r.op)), r.ranks.size(), r.nodes};
    auto& band = groups[key][collective_size_band(r.bytes)];
    band.errors.push_back(r.error());
    ++band.chosen[r.chosen];
  }
  std::string md = preamble;
  md +=
      "\n| node type | collective | layout | size | count | signed median % | median \\|error\\| % "
      "| p95 % | max % | priced as |\n|---|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const auto& [key, bands] : groups)
    for (const char* name : kBands) {
      const auto it = bands.find(name);
      if (it == bands.end()) continue;
      const auto s = error_stats(it->second.errors);
      std::string chosen;
      for (const auto& [c, n] : it->second.chosen)
        chosen += fmt::format("{}{} ×{}", chosen.empty() ? "" : ", ", c, n);
      md += fmt::format("| {} | {} | {} | {} | {} | {:+.1f} | {:.1f} | {:.1f} | {:.1f} | {} |\n",
                        std::get<0>(key), std::get<1>(key),
                        layout_of(std::get<2>(key), std::get<3>(key)), name, s.count,
                        100 * median_of(it->second.errors), 100 * s.median, 100 * s.p95,
                        100 * s.max, chosen);
    }
  return md;
}

}  // namespace meshsim
