// The node as NVML sees it, written as a meshsim cluster file (explicit form): GPUs, their
// NVLinks (to NVSwitches, grouped by the switch's PCI bus id, or directly to another GPU),
// their PCIe generation and width to the CPU socket of their NUMA node.
//
// NVML is loaded at run time with dlopen: libnvidia-ml.so.1 comes with the driver, not with
// the CUDA toolkit (this toolkit ships no nvml.h), so the few entry points used are declared
// here with the types of NVML's stable C API (nvml.h, "v2"/"v3" versions).
#include <dlfcn.h>
#include <strings.h>

#include <cctype>
#include <map>
#include <set>

#include "compute/calibration_fit.hpp"
#include "harness.hpp"

namespace calib {
namespace {

using nvmlReturn = int;  // NVML_SUCCESS = 0
using nvmlDevice = void*;
struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (Hopper and Blackwell)

struct Nvml {
  void* lib = nullptr;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  nvmlReturn (*count)(unsigned*) = nullptr;
  nvmlReturn (*handle)(unsigned, nvmlDevice*) = nullptr;
  nvmlReturn (*name)(nvmlDevice, char*, unsigned) = nullptr;
  nvmlReturn (*memory)(nvmlDevice, NvmlMemory*) = nullptr;
  nvmlReturn (*pci)(nvmlDevice, NvmlPciInfo*) = nullptr;
  nvmlReturn (*link_state)(nvmlDevice, unsigned, int*) = nullptr;
  nvmlReturn (*remote_pci)(nvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn (*pcie_gen)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*pcie_width)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*numa)(nvmlDevice, unsigned*) = nullptr;  // newer drivers only
  nvmlReturn (*driver)(char*, unsigned) = nullptr;

  template <class F>
  void sym(F& f, const char* n) {
    f = reinterpret_cast<F>(dlsym(lib, n));
  }
  bool load() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    sym(init, "nvmlInit_v2");
    sym(shutdown, "nvmlShutdown");
    sym(count, "nvmlDeviceGetCount_v2");
    sym(handle, "nvmlDeviceGetHandleByIndex_v2");
    sym(name, "nvmlDeviceGetName");
    sym(memory, "nvmlDeviceGetMemoryInfo");
    sym(pci, "nvmlDeviceGetPciInfo_v3");
    sym(link_state, "nvmlDeviceGetNvLinkState");
    sym(remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    sym(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    sym(numa, "nvmlDeviceGetNumaNodeId");
    sym(driver, "nvmlSystemGetDriverVersion");
    return init && count && handle && name && pci && init() == 0;
  }
  ~Nvml() {
    if (lib && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

// CUDA device index → NVML handle, matched by PCI bus id (the orders can differ).
nvmlDevice handle_of(Nvml& nv, int cuda_device) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device) != cudaSuccess) return nullptr;
  unsigned n = 0;
  nv.count(&n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice h = nullptr;
    NvmlPciInfo p{};
    if (nv.handle(i, &h) == 0 && nv.pci(h, &p) == 0 && strcasecmp(p.bus_id, bus) == 0) return h;
    // NVML pads the domain to 8 digits, CUDA to 4: compare the tails.
    const std::string a = p.bus_id, b = bus;
    if (a.size() >= b.size() && strcasecmp(a.c_str() + (a.size() - b.size()), bus) == 0) return h;
  }
  return nullptr;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int nvlinks_between(int a, int b) {
  Nvml nv;
  if (!nv.load() || !nv.link_state || !nv.remote_pci) return 0;
  const auto ha = handle_of(nv, a), hb = handle_of(nv, b);
  if (!ha || !hb) return 0;
  std::set<std::string> gpu_buses;
  unsigned count = 0;
  nv.count(&count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice h = nullptr;
    NvmlPciInfo p{};
    if (nv.handle(i, &h) == 0 && nv.pci(h, &p) == 0) gpu_buses.insert(lower(p.bus_id));
  }
  NvmlPciInfo pb{};
  if (nv.pci(hb, &pb) != 0) return 0;
  int links = 0;
  for (unsigned l = 0; l < kMaxLinks; ++l) {
    int active = 0;
    NvmlPciInfo r{};
    if (nv.link_state(ha, l, &active) != 0 || !active || nv.remote_pci(ha, l, &r) != 0) continue;
    // A link straight to `b`, or to an NVSwitch (a remote that is no GPU), which joins every
    // pair of the node.
    const auto remote = lower(r.bus_id);
    if (remote == lower(pb.bus_id) || !gpu_buses.contains(remote)) ++links;
  }
  return links;
}

void node_topology(Json& out, std::vector<std::string>& notes) {
  Nvml nv;
  if (!nv.load()) {
    notes.push_back("topo: NVML (libnvidia-ml.so.1) not available; no topology written");
    return;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    notes.push_back("topo: no CUDA device; no topology written");
    return;
  }
  Json vertices = Json::array(), links = Json::array();
  std::map<std::string, int> gpu_by_bus;
  std::vector<nvmlDevice> handles;
  std::string device_name;
  for (int d = 0; d < n; ++d) {
    const auto h = handle_of(nv, d);
    handles.push_back(h);
    NvmlPciInfo p{};
    if (h && nv.pci(h, &p) == 0) gpu_by_bus[lower(p.bus_id)] = d;
    if (d == 0 && h) {
      char name[96] = {};
      nv.name(h, name, sizeof(name));
      device_name = name;
    }
    vertices.push_back({{"name", "gpu" + std::to_string(d)}, {"kind", "gpu"}, {"node", 0}});
  }
  std::set<unsigned> sockets;
  std::map<std::string, std::string> switches;
  std::set<std::pair<int, int>> direct;
  for (int d = 0; d < n; ++d) {
    const auto h = handles[static_cast<size_t>(d)];
    const std::string gpu = "gpu" + std::to_string(d);
    unsigned numa = 0;
    if (h && nv.numa && nv.numa(h, &numa) != 0) numa = 0;
    sockets.insert(numa);
    unsigned gen = 0, width = 0;
    if (h && nv.pcie_gen) nv.pcie_gen(h, &gen);
    if (h && nv.pcie_width) nv.pcie_width(h, &width);
    // GT/s per lane by generation; 128b/130b encoding from Gen3 on.
    static const double kGts[] = {0, 2.5, 5, 8, 16, 32, 64};
    const double gts = gen < 7 ? kGts[gen] : 64;
    const double pcie_GBps = gts * width / 8.0 * (gen >= 3 ? 128.0 / 130.0 : 0.8);
    if (pcie_GBps > 0)
      links.push_back({{"a", gpu},
                       {"b", "cpu" + std::to_string(numa)},
                       {"kind", "pcie"},
                       {"bandwidth_GBps", pcie_GBps},
                       {"latency_ns", 250}});
    else
      notes.push_back("topo: no PCIe link width for GPU " + std::to_string(d));
    if (!h || !nv.link_state || !nv.remote_pci) continue;
    std::map<std::string, int> per_target;
    for (unsigned l = 0; l < kMaxLinks; ++l) {
      int active = 0;
      NvmlPciInfo r{};
      if (nv.link_state(h, l, &active) != 0 || !active || nv.remote_pci(h, l, &r) != 0) continue;
      ++per_target[lower(r.bus_id)];
    }
    for (const auto& [bus, count] : per_target) {
      // NVLink3/4: 25 GB/s per link per direction (NVIDIA A100/H100 whitepapers).
      const double bw = 25.0 * count;
      if (auto peer = gpu_by_bus.find(bus); peer != gpu_by_bus.end()) {
        const auto key = std::minmax(d, peer->second);
        if (direct.insert(key).second)
          links.push_back({{"a", gpu},
                           {"b", "gpu" + std::to_string(peer->second)},
                           {"kind", "nvlink"},
                           {"bandwidth_GBps", bw},
                           {"latency_ns", 100}});
      } else {
        auto [it, fresh] = switches.emplace(bus, "nvswitch" + std::to_string(switches.size()));
        if (fresh) vertices.push_back({{"name", it->second}, {"kind", "nvswitch"}, {"node", 0}});
        links.push_back({{"a", gpu},
                         {"b", it->second},
                         {"kind", "nvlink"},
                         {"bandwidth_GBps", bw},
                         {"latency_ns", 100}});
      }
    }
  }
  for (unsigned s : sockets)
    vertices.push_back({{"name", "cpu" + std::to_string(s)}, {"kind", "cpu"}, {"node", 0}});
  for (auto i = sockets.begin(); i != sockets.end(); ++i)
    for (auto j = std::next(i); j != sockets.end(); ++j)
      links.push_back({{"a", "cpu" + std::to_string(*i)},
                       {"b", "cpu" + std::to_string(*j)},
                       {"kind", "cpu_interconnect"},
                       {"bandwidth_GBps", 10},
                       {"latency_ns", 300}});
  std::string gpu = meshsim::catalogue_gpu_name(device_name);
  if (gpu.empty()) {
    notes.push_back("topo: '" + device_name +
                    "' is not in meshsim's GPU catalogue; replace the "
                    "gpu field with a spec object");
    gpu = device_name;
  }
  char driver[96] = {};
  if (nv.driver) nv.driver(driver, sizeof(driver));
  out["topology"] = {{"name", "calibrated-node"},
                     {"description", "one node as NVML reports it (driver " + std::string(driver) +
                                         "), written by meshsim-calibrate topo"},
                     {"gpu", gpu},
                     {"vertices", vertices},
                     {"links", links}};
}

}  // namespace calib
