#include "network/collective_validation.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

#include "core/case_file.hpp"
#include "core/json_reader.hpp"
#include "network/collective_runner.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim {

std::vector<ValidationRow> run_collective_cases(const std::string& path, const std::string& root,
                                                const std::string& only) {
  const auto file = read_case_file(path, {"tolerance_rule"});
  const auto& cases = file.cases;
  std::map<std::pair<std::string, std::int32_t>, std::unique_ptr<Topology>> topologies;
  std::vector<ValidationRow> rows;
  for (const auto& c : cases) {
    ObjectReader r(c);
    ValidationRow row;
    row.group = "collectives";
    row.name = r.required("name").string();
    const auto topo_name = r.required("topology").file_name();
    const auto op_ref = r.required("op");
    const auto op = parse_collective_op(op_ref.string());
    if (!op) op_ref.fail("unknown collective '" + op_ref.string() + "'");
    const auto gpus_ref = r.required("gpus");
    // Checked against the cluster once it is loaded (below).
    const auto gpus = static_cast<std::int32_t>(gpus_ref.integer_in(2, kMaxGpus));
    const double bytes = r.required("bytes").positive_number();
    const auto algo_ref = r.required("algo");
    std::optional<CollectiveAlgo> algo;
    if (algo_ref.string() != "auto") {
      algo = parse_collective_algo(algo_ref.string());
      if (!algo) algo_ref.fail("unknown algorithm '" + algo_ref.string() + "'");
    }
    const auto metric = r.required("metric");
    if (metric.string() != "busbw_Bps") metric.fail("expected busbw_Bps");
    row.metric = "busbw";
    row.unit = "GB/s";
    row.measured = r.required("measured").positive_number() / 1e9;
    row.tolerance = r.required("tolerance").positive_number();
    row.source = r.required("source").string();
    if (auto v = r.optional("reading")) row.reading = v->string();
    if (auto g = r.optional("known_gap")) row.known_gap = g->string();
    std::int32_t nodes = 0;
    if (auto nd = r.optional("nodes"))
      nodes = static_cast<std::int32_t>(nd->integer_in(1, kMaxGpus));
    r.finish();
    if (!only.empty() && row.name.find(only) == std::string::npos) continue;
    const auto key = std::pair{topo_name, nodes};
    if (!topologies.contains(key)) {
      TopologyOptions opt;
      if (nodes) opt.nodes = nodes;
      topologies.emplace(
          key, std::make_unique<Topology>(load_topology(root + "/topologies/" + topo_name, opt)));
    }
    const Topology& topo = *topologies.at(key);
    if (static_cast<std::size_t>(gpus) > topo.gpu_count())
      gpus_ref.fail(fmt::format("{} GPUs asked, the cluster has {}", gpus, topo.gpu_count()));
    Router router(topo);
    std::vector<std::int32_t> ranks;
    for (std::int32_t g = 0; g < gpus; ++g) ranks.push_back(g);
    const auto priced = price_collective(topo, router, {*op, ranks, bytes}, algo);
    row.simulated = bytes / priced.time.seconds() * busbw_factor(*op, ranks.size()) / 1e9;
    row.detail = fmt::format("{} on {} ranks, {:.0f} B, {} → {}/{}", name_of(*op), gpus, bytes,
                             algo_ref.string(), name_of(priced.algo), name_of(priced.protocol));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace meshsim
