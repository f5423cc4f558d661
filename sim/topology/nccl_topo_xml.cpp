#include "topology/nccl_topo_xml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace meshsim {
namespace {

using boost::property_tree::ptree;

std::string attr(const ptree& node, const std::string& key) {
  return node.get<std::string>("<xmlattr>." + key, "");
}

// Attributes are parsed strictly (issue 19: count="five" silently became one link): a number
// must be all of the attribute, or the error names the file, the element and the attribute.
// `element` reads like "gpu0/nvlink" or "pci 0000:18:00.0".
struct XmlPlace {
  const std::string& file;
  std::string element;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(file, element + " @" + key, what);
  }
  // Empty or absent → `fallback`; otherwise a finite number from lo to hi, nothing after it.
  double number(const ptree& node, const std::string& key, double fallback, double lo,
                double hi) const {
    const auto text = attr(node, key);
    if (text.empty()) return fallback;
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != text.size() || !std::isfinite(v)) fail(key, "'" + text + "' is not a number");
    if (v < lo || v > hi) fail(key, fmt::format("{:g} is outside {:g} to {:g}", v, lo, hi));
    return v;
  }
  int integer(const ptree& node, const std::string& key, int fallback, int lo, int hi) const {
    const double v = number(node, key, fallback, lo, hi);
    if (v != std::floor(v)) fail(key, "'" + attr(node, key) + "' is not an integer");
    return static_cast<int>(v);
  }
};

// "32.0 GT/s PCIe" × width 16 → bytes/s per direction after 128b/130b encoding (PCIe 3+). NCCL
// writes the kernel's sysfs strings ("32.0 GT/s PCIe", "16 GT/s", "Unknown"); an unknown speed
// or a width of 0 is 0 here, and the device inherits its parent's link.
double pcie_Bps(const ptree& node, const XmlPlace& at) {
  const auto speed = attr(node, "link_speed");
  double gts = 0;
  if (!speed.empty() && speed != "Unknown") {
    std::size_t used = 0;
    try {
      gts = std::stod(speed, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    const auto rest = speed.substr(used);
    if (used == 0 || !(gts > 0 && gts <= 1024) || (rest != " GT/s" && rest != " GT/s PCIe"))
      at.fail("link_speed", "'" + speed + "' is not a PCIe speed like \"32.0 GT/s PCIe\"");
  }
  const double w = at.integer(node, "link_width", 0, 0, 32);
  if (!(gts > 0) || !(w > 0)) return 0;
  return gts * 1e9 * w / 8.0 * 128.0 / 130.0;
}

// NVLink bandwidth per link per direction by GPU generation (NVIDIA architecture whitepapers:
// NVLink3 on A100 and NVLink4 on H100 carry 25 GB/s per link per direction, NVLink5 on
// Blackwell 50 GB/s).
double nvlink_link_Bps(int sm) {
  return sm >= 100 ? 50e9 : 25e9;
}

std::string gpu_for_sm(int sm) {
  if (sm >= 100) return "B200-SXM-180GB";
  if (sm >= 90) return "H100-SXM5-80GB";
  if (sm >= 80) return "A100-SXM4-80GB";
  return "";
}

struct Builder {
  explicit Builder(const std::string& xml_file) : file(xml_file) {}
  const std::string& file;
  Json vertices = Json::array(), links = Json::array();
  std::map<std::string, std::string> by_busid;  // PCI bus id → vertex name
  std::set<std::pair<std::string, std::string>> nvlink_pairs;
  std::map<std::string, std::string> nvswitches;  // bus id → vertex name
  struct GpuLinks {
    std::string name;
    std::string element;  // "pci <busid>/gpu", for errors
    int sm = 0;
    std::vector<std::tuple<std::string, int, std::string>> nvlinks;  // target, count, tclass
  };
  std::vector<GpuLinks> gpus;
  int pcie_switches = 0, nics = 0, cpus = 0;
  bool fabric = false;

  double nic_Bps = 0;  // the slowest NIC with a known speed: the fabric's port rate

  void vertex(const std::string& name, const char* kind) {
    vertices.push_back({{"name", name}, {"kind", kind}});
  }
  void link(const std::string& a, const std::string& b, const char* kind, double Bps,
            int latency_ns) {
    Json l = {{"a", a}, {"b", b}, {"kind", kind}, {"latency_ns", latency_ns}};
    if (std::string(kind) == "infiniband" || std::string(kind) == "ethernet")
      l["bandwidth_Gbps"] = Bps * 8 / 1e9;
    else
      l["bandwidth_GBps"] = Bps / 1e9;
    links.push_back(l);
  }

  // A <pci> element under `parent`: a switch, a GPU, a NIC or another device.
  void pci(const ptree& node, const std::string& parent, double parent_Bps) {
    const auto busid = attr(node, "busid");
    const auto cls = attr(node, "class");
    const XmlPlace at{file, "pci " + (busid.empty() ? std::string("(no busid)") : busid)};
    double bw = pcie_Bps(node, at);
    if (!(bw > 0)) bw = parent_Bps;
    if (!(bw > 0))
      at.fail("link_speed",
              "no PCIe link speed and width here or on any parent; the device's bandwidth is "
              "unknown");
    if (const auto gpu = node.get_child_optional("gpu")) {
      const auto name = fmt::format("gpu{}", gpus.size());
      vertex(name, "gpu");
      link(name, parent, "pcie", bw, 250);
      by_busid[busid] = name;
      GpuLinks g;
      g.name = name;
      g.element = at.element + "/gpu";
      const XmlPlace gpu_at{file, at.element + "/gpu"};
      g.sm = gpu_at.integer(*gpu, "sm", 0, 0, 1000);
      // An NVLink 5 GPU has 18 links; 64 leaves room for any part announced.
      for (const auto& [tag, child] : *gpu)
        if (tag == "nvlink")
          g.nvlinks.emplace_back(
              attr(child, "target"),
              XmlPlace{file, gpu_at.element + "/nvlink"}.integer(child, "count", 1, 1, 64),
              attr(child, "tclass"));
      gpus.push_back(std::move(g));
      return;
    }
    if (const auto nic = node.get_child_optional("nic")) {
      for (const auto& [tag, net] : *nic) {
        if (tag != "net") continue;
        const auto name = fmt::format("nic{}", nics++);
        vertex(name, "nic");
        link(name, parent, "pcie", bw, 250);
        // speed is in Mb/s (NCCL's ncclNet properties).
        // 0 is "unknown" in NCCL's dumps; 1e9 Mb/s (1 Pb/s) bounds any NIC.
        const double mbps = XmlPlace{file, at.element + "/nic/net"}.number(net, "speed", 0, 0, 1e9);
        if (mbps > 0) {
          // The switch the node's NICs reach, made by the first NIC with a known speed (found
          // by fuzz_nccl_xml: keyed on the first NIC, a dump whose first NIC had speed 0 linked
          // the others to a switch that was never made).
          fabric = true;
          nic_Bps = nic_Bps > 0 ? std::min(nic_Bps, mbps * 1e6 / 8) : mbps * 1e6 / 8;
        }
      }
      return;
    }
    std::string here = parent;
    if (cls.rfind("0x0604", 0) == 0) {  // PCI bridge: a PCIe switch
      here = fmt::format("pcie{}", pcie_switches++);
      vertex(here, "pcie_switch");
      link(here, parent, "pcie", bw, 250);
      by_busid[busid] = here;
    }
    for (const auto& [tag, child] : node)
      if (tag == "pci") pci(child, here, bw);
  }
};

}  // namespace

namespace {

// Deepest element nesting of an XML text, counted before parsing: the parser and the PCI walk
// below recurse once per level, so a hostile file of 100,000 nested elements would overflow the
// stack. NCCL's dumps nest about six deep (system, cpu, pci switches, gpu, nvlink).
std::size_t xml_depth(const std::string& text) {
  std::size_t depth = 0, deepest = 0;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '<') continue;
    const char next = text[i + 1];
    if (next == '/') {
      if (depth > 0) --depth;
    } else if (next != '?' && next != '!') {
      const auto close = text.find('>', i);
      if (close == std::string::npos) break;
      if (text[close - 1] != '/') deepest = std::max(deepest, ++depth);
      i = close;
    }
  }
  return deepest;
}

}  // namespace

Json nccl_topo_to_topology(const std::string& xml_path, const NcclTopoOptions& options) {
  return nccl_topo_text_to_topology(read_input_file(xml_path), xml_path, options);
}

Json nccl_topo_text_to_topology(const std::string& text, const std::string& xml_path,
                                const NcclTopoOptions& options) {
  ptree tree;
  constexpr std::size_t kMaxDepth = 64;
  if (const auto d = xml_depth(text); d > kMaxDepth)
    throw Error(xml_path, "",
                "elements nest " + std::to_string(d) +
                    " deep; an NCCL topology dump nests about 6 "
                    "(limit " +
                    std::to_string(kMaxDepth) + ")");
  try {
    std::istringstream in(text);
    boost::property_tree::read_xml(in, tree);
  } catch (const boost::property_tree::xml_parser_error& e) {
    throw Error(xml_path, "line " + std::to_string(e.line()), e.message());
  }
  const auto system = tree.get_child_optional("system");
  if (!system) throw Error(xml_path, "", "no <system> element (is this an NCCL topology dump?)");
  Builder b{xml_path};
  std::vector<std::pair<std::string, std::string>> sockets;  // name, vendor
  for (const auto& [tag, cpu] : *system) {
    if (tag != "cpu") continue;
    const auto name = fmt::format("cpu{}", b.cpus++);
    b.vertex(name, "cpu");
    sockets.emplace_back(name, attr(cpu, "vendor"));
    for (const auto& [t2, child] : cpu)
      if (t2 == "pci") b.pci(child, name, 0);
  }
  if (b.gpus.empty()) throw Error(xml_path, "", "no <gpu> elements in the dump");
  // Sockets: one interconnect link between each pair, at NCCL's own figures for the path
  // (src/graph/topo.h: SKL_QPI_BW 10 GB/s for Intel, AMD_BW 16 GB/s).
  for (std::size_t i = 0; i < sockets.size(); ++i)
    for (std::size_t j = i + 1; j < sockets.size(); ++j)
      b.link(sockets[i].first, sockets[j].first, "cpu_interconnect",
             sockets[i].second == "AuthenticAMD" ? 16e9 : 10e9, 300);
  for (const auto& g : b.gpus)
    for (const auto& [target, count, tclass] : g.nvlinks) {
      const double bw = count * nvlink_link_Bps(g.sm);
      if (tclass == "0x068000") {  // an NVSwitch
        auto [it, fresh] =
            b.nvswitches.emplace(target, fmt::format("nvswitch{}", b.nvswitches.size()));
        if (fresh) b.vertex(it->second, "nvswitch");
        b.link(g.name, it->second, "nvlink", bw, 100);
      } else if (auto peer = b.by_busid.find(target); peer != b.by_busid.end()) {
        // Found by fuzz_nccl_xml: an NVLink whose target is the GPU's own bus id.
        if (peer->second == g.name)
          throw Error(xml_path, g.element + "/nvlink @target",
                      "'" + target + "' is this GPU's own bus id (an NVLink to itself)");
        const auto key = std::minmax(g.name, peer->second);
        if (b.nvlink_pairs.insert({key.first, key.second}).second)
          b.link(g.name, peer->second, "nvlink", bw, 100);
      }
    }
  std::string gpu = options.gpu;
  if (gpu.empty()) gpu = gpu_for_sm(b.gpus.front().sm);
  if (gpu.empty())
    throw Error(xml_path, "",
                fmt::format("SM version {} is not in the GPU catalogue; give the GPU with --gpu",
                            b.gpus.front().sm));
  Json sources = {
      "NCCL_TOPO_DUMP_FILE of the node; PCIe from link_speed × link_width (128b/130b); "
      "NVLink 25 GB/s per link per direction (50 on Blackwell), NVIDIA whitepapers"};
  // A node template: `--nodes N` (or another file's "node_from") stamps it out under the fabric
  // below. The dump describes one node, not the network between nodes, so the fabric is an
  // assumption, said in the file: a rail-optimized, non-blocking fat tree of the NICs' rate.
  Json fabric = {{"kind", "none"}};
  if (b.fabric) {
    fabric = {
        {"kind", "fat_tree"},
        {"link",
         {{"kind", "infiniband"}, {"bandwidth_Gbps", b.nic_Bps * 8 / 1e9}, {"latency_ns", 500}}},
        {"rail_optimized", true},
        {"leaf_down_ports", 32},
        {"spines", std::clamp(b.nics, 1, 4096)},  // the reader's bound
        {"oversubscription", 1}};
    sources.push_back(
        "Fabric (not in the dump, assumed): rail-optimized two-tier fat tree, 32 nodes per leaf, "
        "1:1, each port at the slowest NIC's speed, 500 ns per hop; edit \"fabric\" for the real "
        "network");
  }
  return {
      {"name", options.name},
      {"description",
       fmt::format("one node read from the NCCL topology dump {}: {} GPUs, {} NVSwitches, {} "
                   "PCIe switches, {} CPU sockets, {} NICs",
                   xml_path, b.gpus.size(), b.nvswitches.size(), b.pcie_switches, b.cpus, b.nics)},
      {"sources", std::move(sources)},
      {"node", {{"gpu", gpu}, {"vertices", b.vertices}, {"links", b.links}}},
      {"nodes", 1},
      {"fabric", std::move(fabric)}};
}

}  // namespace meshsim
