// meshsim topo --topology T [--nodes N] [--dot FILE] [--json]
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "job_args.hpp"
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

  if (a.cluster.json) {
    Json j;
    j["name"] = topo.name;
    j["gpus"] = s.gpus;
    j["nodes"] = s.nodes;
    j["vertices"] = s.vertices;
    j["links"] = s.links;
    j["gpu"] = {{"model", topo.gpu.model},
                {"peak_flops", topo.gpu.peak_flops},
                {"hbm_bytes", topo.gpu.hbm_bytes.count()},
                {"hbm_Bps", topo.gpu.hbm_Bps},
                {"l2_bytes", topo.gpu.l2_bytes.count()}};  // 0: unknown, no L2 term
    j["per_gpu_Bps"] = {{"nvlink", s.nvlink_Bps}, {"pcie", s.pcie_Bps}, {"network", s.network_Bps}};
    j["bisection_Bps"] = s.bisection_Bps;
    if (!matrix.empty()) {
      Json m = Json::array();
      for (const auto& row : matrix) {
        Json r = Json::array();
        for (auto c : row) r.push_back(std::string(name_of(c)));
        m.push_back(r);
      }
      j["path_classes"] = m;
    }
    cli_out() << json_text(j) << "\n";
    return 0;
  }

  cli_out() << fmt::format("cluster    {} ({} node{}, {} GPUs)\n", topo.name, s.nodes,
                           s.nodes == 1 ? "" : "s", s.gpus);
  if (!topo.description.empty()) cli_out() << fmt::format("           {}\n", topo.description);
  std::string peaks;
  for (const auto& [dtype, flops] : topo.gpu.peak_flops)
    peaks += fmt::format("{}{} {:g}", peaks.empty() ? "" : ", ", dtype, flops / 1e12);
  const auto l2 = topo.gpu.l2_bytes.count();
  cli_out() << fmt::format("gpu        {}: {} TFLOP/s dense; HBM {:.1f} GiB at {:g} GB/s; {}\n",
                           topo.gpu.model, peaks, topo.gpu.hbm_bytes.as_double() / (1u << 30),
                           topo.gpu.hbm_Bps / 1e9,
                           l2 > 0 ? fmt::format("L2 {:g} MiB", static_cast<double>(l2) / (1 << 20))
                                  : std::string("L2 size unknown"));
  std::string verts, links;
  for (const auto& [k, n] : s.vertices)
    verts += fmt::format("{}{} {}", verts.empty() ? "" : ", ", k, n);
  for (const auto& [k, n] : s.links)
    links += fmt::format("{}{} {}", links.empty() ? "" : ", ", k, n);
  cli_out() << fmt::format("vertices   {}\n", verts);
  cli_out() << fmt::format("links      {}\n", links);
  cli_out() << fmt::format(
      "per GPU    nvlink {:g} GB/s, pcie {:g} GB/s, network {:g} GB/s (each direction)\n",
      s.nvlink_Bps / 1e9, s.pcie_Bps / 1e9, s.network_Bps / 1e9);
  cli_out() << fmt::format(
      "bisection  {:g} GB/s (first half of the GPUs to the second, each direction)\n",
      s.bisection_Bps / 1e9);
  if (!matrix.empty()) {
    cli_out() << "\npath classes (NCCL: NVL NVLink, PIX/PXB PCIe switch(es), PHB host bridge, "
                 "SYS across sockets, NET network)\n      ";
    for (std::size_t j = 0; j < matrix.size(); ++j)
      cli_out() << fmt::format("{:>6}", fmt::format("GPU{}", j));
    cli_out() << "\n";
    for (std::size_t i = 0; i < matrix.size(); ++i) {
      cli_out() << fmt::format("{:<6}", fmt::format("GPU{}", i));
      for (auto c : matrix[i]) cli_out() << fmt::format("{:>6}", name_of(c));
      cli_out() << "\n";
    }
  }
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
