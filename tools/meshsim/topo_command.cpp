// meshsim topo --topology T [--nodes N] [--dot FILE] [--json]
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "job_args.hpp"
#include "report/topology_report.hpp"
#include "topology/graphviz.hpp"
#include "topology/topology_loader.hpp"
#include "topology/topology_summary.hpp"

namespace meshsim::cli {
namespace {

struct TopoArgs {
  ClusterArgs cluster;
  std::string dot;
};

constexpr std::size_t kMatrixGpus = 16;

int run_topo(const TopoArgs& a) {
  const Topology topo = a.cluster.load();
  const TopologySummary s = summarize(topo);
  Router router(topo);
  const auto matrix = topo.gpu_count() <= kMatrixGpus ? path_matrix(topo, router, kMatrixGpus)
                                                      : std::vector<std::vector<PathClass>>{};
  if (!a.dot.empty()) {
    write_output(a.dot, "--dot", [&](std::ostream& out) { write_dot(out, topo); });
  }

  const TopologyReport report{&topo, s, matrix};
  if (a.cluster.json) {
    cli_out() << json_text(topology_json(report)) << "\n";
    return 0;
  }
  cli_out() << topology_text(report);
  if (!a.dot.empty()) cli_out() << fmt::format("\nwrote {}\n", a.dot);
  return 0;
}

}  // namespace

Runner add_topo_command(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  auto* cmd =
      app.add_subcommand("topo", "Describe a cluster: counts, bandwidths, bisection, paths");
  args->cluster.add_to(cmd);
  cmd->add_option("--dot", args->dot, "Write the graph in Graphviz format to FILE");
  return [args] { return run_topo(*args); };
}

}  // namespace meshsim::cli
