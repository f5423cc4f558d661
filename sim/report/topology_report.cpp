#include "report/topology_report.hpp"

#include <fmt/format.h>

namespace meshsim {

namespace {

// "a 1, b 2" from a name → count map.
std::string counts_text(const std::map<std::string, std::size_t>& counts) {
  std::string out;
  for (const auto& [k, n] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", k, n);
  return out;
}

}  // namespace

std::string topology_text(const TopologyReport& r) {
  const Topology& topo = *r.topology;
  const TopologySummary& s = r.summary;
  std::string out = fmt::format("cluster    {} ({} node{}, {} GPUs)\n", topo.name, s.nodes,
                                s.nodes == 1 ? "" : "s", s.gpus);
  if (!topo.description.empty()) out += fmt::format("           {}\n", topo.description);
  std::string peaks;
  for (const auto& [dtype, flops] : topo.gpu.peak_flops)
    peaks += fmt::format("{}{} {:g}", peaks.empty() ? "" : ", ", dtype, flops / 1e12);
  const auto l2 = topo.gpu.l2_bytes.count();
  out += fmt::format("gpu        {}: {} TFLOP/s dense; HBM {:.1f} GiB at {:g} GB/s; {}\n",
                     topo.gpu.model, peaks, topo.gpu.hbm_bytes.as_double() / (1u << 30),
                     topo.gpu.hbm_Bps / 1e9,
                     l2 > 0 ? fmt::format("L2 {:g} MiB", static_cast<double>(l2) / (1 << 20))
                            : std::string("L2 size unknown"));
  out += fmt::format("vertices   {}\n", counts_text(s.vertices));
  out += fmt::format("links      {}\n", counts_text(s.links));
  // NVLink-C2C (a Grace CPU's link to its GPUs) only where the GPU has one.
  out += fmt::format(
      "per GPU    nvlink {:g} GB/s, pcie {:g} GB/s, {}network {:g} GB/s (each direction)\n",
      s.nvlink_Bps / 1e9, s.pcie_Bps / 1e9,
      s.c2c_Bps > 0 ? fmt::format("c2c {:g} GB/s, ", s.c2c_Bps / 1e9) : "", s.network_Bps / 1e9);
  out +=
      fmt::format("bisection  {:g} GB/s (first half of the GPUs to the second, each direction)\n",
                  s.bisection_Bps / 1e9);
  if (!r.paths.empty()) {
    out +=
        "\npath classes (NCCL: NVL NVLink, PIX/PXB PCIe switch(es), PHB host bridge, "
        "SYS across sockets, NET network)\n      ";
    for (std::size_t j = 0; j < r.paths.size(); ++j)
      out += fmt::format("{:>6}", fmt::format("GPU{}", j));
    out += "\n";
    for (std::size_t i = 0; i < r.paths.size(); ++i) {
      out += fmt::format("{:<6}", fmt::format("GPU{}", i));
      for (auto c : r.paths[i]) out += fmt::format("{:>6}", name_of(c));
      out += "\n";
    }
  }
  return out;
}

Json topology_json(const TopologyReport& r) {
  const Topology& topo = *r.topology;
  const TopologySummary& s = r.summary;
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
  j["per_gpu_Bps"] = {{"nvlink", s.nvlink_Bps},
                      {"pcie", s.pcie_Bps},
                      {"c2c", s.c2c_Bps},
                      {"network", s.network_Bps}};
  j["bisection_Bps"] = s.bisection_Bps;
  if (!r.paths.empty()) {
    Json m = Json::array();
    for (const auto& row : r.paths) {
      Json line = Json::array();
      for (auto c : row) line.push_back(std::string(name_of(c)));
      m.push_back(line);
    }
    j["path_classes"] = m;
  }
  return j;
}

}  // namespace meshsim
