#include "topology/fabric.hpp"

#include <string>

namespace meshsim {
namespace {

std::int32_t read_count(ObjectReader& r, const char* key, std::int64_t max) {
  auto v = r.required(key);
  const auto n = v.positive_integer();
  if (n > max) v.fail("must be at most " + std::to_string(max));
  return static_cast<std::int32_t>(n);
}

double read_ratio(ObjectReader& r, const char* key) {
  auto v = r.optional(key);
  if (!v) return 1.0;
  const double x = v->positive_number();
  if (x < 1.0) v->fail("an oversubscription ratio is at least 1 (1 = full bisection)");
  return x;
}

}  // namespace

FabricSpec read_fabric_spec(const JsonRef& ref) {
  ObjectReader r(ref);
  FabricSpec s;
  auto kind_ref = r.required("kind");
  const auto kind = kind_ref.string();
  if (kind == "none") {
    s.kind = FabricKind::none;
    r.finish();
    return s;
  }
  if (kind == "single_switch")
    s.kind = FabricKind::single_switch;
  else if (kind == "fat_tree")
    s.kind = FabricKind::fat_tree;
  else
    kind_ref.fail("unknown fabric kind '" + kind + "' (known: none, single_switch, fat_tree)");
  {
    auto link_ref = r.required("link");
    ObjectReader lr(link_ref);
    s.link = read_link_spec(lr);
    lr.finish();
    if (!is_network(s.link.kind))
      link_ref.child("kind").fail("a fabric link must be infiniband or ethernet");
  }
  if (s.kind == FabricKind::fat_tree) {
    if (auto v = r.optional("rail_optimized")) s.rail_optimized = v->boolean();
    s.leaf_down_ports = read_count(r, "leaf_down_ports", 4096);
    s.spines = read_count(r, "spines", 4096);
    s.oversubscription = read_ratio(r, "oversubscription");
    if (auto p = r.optional("pod_nodes")) {
      const auto n = p->positive_integer();
      if (n > 1'000'000) p->fail("too large");
      s.pod_nodes = static_cast<std::int32_t>(n);
      s.cores = read_count(r, "cores", 4096);
      s.core_oversubscription = read_ratio(r, "core_oversubscription");
    }
  }
  r.finish();
  return s;
}

void build_fabric(const FabricSpec& spec, const std::vector<std::vector<VertexId>>& nics,
                  Topology& topo) {
  if (spec.kind == FabricKind::none) return;
  const double port_Bps = spec.link.bandwidth_Bps;
  const auto kind = spec.link.kind;
  const auto lat = spec.link.latency;
  const auto nodes = static_cast<std::int32_t>(nics.size());
  if (spec.kind == FabricKind::single_switch) {
    const auto sw = topo.add_vertex(Vertex{VertexKind::leaf_switch, "switch", -1, 0, -1});
    for (const auto& node : nics)
      for (auto nic : node) topo.add_link(nic, sw, kind, port_Bps, lat);
    return;
  }

  // Leaves. Rail-optimized: leaf (unit u, rail r) serves NIC r of nodes [u·P, (u+1)·P).
  const std::int32_t rails = nics.empty() ? 0 : static_cast<std::int32_t>(nics.front().size());
  const std::int32_t P = spec.leaf_down_ports;
  std::vector<VertexId> leaves;
  std::vector<std::int32_t> leaf_pod;  // pod of each leaf (0 with two tiers)
  const std::int32_t pod_nodes = spec.pod_nodes.value_or(nodes);
  auto new_leaf = [&](const std::string& name, std::int32_t pod) {
    leaves.push_back(topo.add_vertex(
        Vertex{VertexKind::leaf_switch, name, -1, static_cast<std::int32_t>(leaves.size()), -1}));
    leaf_pod.push_back(pod);
    return leaves.back();
  };
  if (spec.rail_optimized) {
    // Units never straddle pods: a pod holds whole units.
    const std::int32_t pods = (nodes + pod_nodes - 1) / pod_nodes;
    std::vector<VertexId> leaf_of;  // index: (pod·units_per_pod + unit)·rails + rail
    for (std::int32_t pod = 0; pod < pods; ++pod) {
      const std::int32_t pod_begin = pod * pod_nodes;
      const std::int32_t pod_end = std::min(nodes, pod_begin + pod_nodes);
      const std::int32_t units = (pod_end - pod_begin + P - 1) / P;
      for (std::int32_t u = 0; u < units; ++u)
        for (std::int32_t r = 0; r < rails; ++r)
          leaf_of.push_back(new_leaf(
              "leaf/p" + std::to_string(pod) + "/u" + std::to_string(u) + "/r" + std::to_string(r),
              pod));
    }
    std::size_t base = 0;
    for (std::int32_t pod = 0; pod < pods; ++pod) {
      const std::int32_t pod_begin = pod * pod_nodes;
      const std::int32_t pod_end = std::min(nodes, pod_begin + pod_nodes);
      for (std::int32_t n = pod_begin; n < pod_end; ++n) {
        const std::int32_t u = (n - pod_begin) / P;
        for (std::int32_t r = 0; r < rails; ++r)
          topo.add_link(nics[n][r], leaf_of[base + u * rails + r], kind, port_Bps, lat);
      }
      base += static_cast<std::size_t>((pod_end - pod_begin + P - 1) / P) * rails;
    }
  } else {
    std::int64_t port = 0;
    std::int32_t current_pod = -1;
    VertexId leaf = 0;
    for (std::int32_t n = 0; n < nodes; ++n) {
      const std::int32_t pod = n / pod_nodes;
      if (pod != current_pod) {  // a new pod starts on a fresh leaf
        current_pod = pod;
        port = 0;
      }
      for (auto nic : nics[n]) {
        if (port % P == 0)
          leaf = new_leaf("leaf/p" + std::to_string(pod) + "/" + std::to_string(port / P), pod);
        topo.add_link(nic, leaf, kind, port_Bps, lat);
        ++port;
      }
    }
  }

  // Spines: each pod has `spines` spines; each leaf spreads its up bandwidth (down ports ×
  // port bandwidth / oversubscription) evenly over the spines of its pod. One aggregated link
  // per (leaf, spine) pair stands for the parallel cables between them.
  const double leaf_up_Bps = P * port_Bps / spec.oversubscription;
  const std::int32_t pods = leaf_pod.empty() ? 0 : leaf_pod.back() + 1;
  std::vector<std::vector<VertexId>> spines(pods);
  std::vector<double> spine_down_Bps(pods, 0.0);
  for (std::int32_t pod = 0; pod < pods; ++pod)
    for (std::int32_t s = 0; s < spec.spines; ++s)
      spines[pod].push_back(topo.add_vertex(Vertex{
          VertexKind::spine_switch, "spine/p" + std::to_string(pod) + "/" + std::to_string(s), -1,
          pod * spec.spines + s, -1}));
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const auto pod = leaf_pod[i];
    for (auto sp : spines[pod]) topo.add_link(leaves[i], sp, kind, leaf_up_Bps / spec.spines, lat);
    spine_down_Bps[pod] += leaf_up_Bps / spec.spines;
  }
  if (!spec.pod_nodes) return;

  // Cores: a spine's up bandwidth is its down bandwidth / core oversubscription, in ports of the
  // fabric's rate. When that fills a port to every core (or more: one aggregated link per core)
  // it links to every core, spread evenly. When it fills fewer ports (a pod the cluster fills
  // only in part, --nodes not a multiple of pod_nodes, or an oversubscribed core tier), the
  // spine links to that many cores at the port rate, from an offset of its own so that every
  // core is reached: a cable runs at its port's rate. Spreading the up bandwidth over every core
  // instead gave links of a fraction of a port (6.25 GB/s for a 400G fabric with one unit of 8
  // nodes in the last pod), and one flow's ECMP path through one of them ran at that rate.
  std::vector<VertexId> cores;
  for (std::int32_t c = 0; c < spec.cores; ++c)
    cores.push_back(
        topo.add_vertex(Vertex{VertexKind::core_switch, "core/" + std::to_string(c), -1, c, -1}));
  for (std::int32_t pod = 0; pod < pods; ++pod) {
    const double up_Bps = spine_down_Bps[pod] / spec.core_oversubscription;
    const double ports = up_Bps / port_Bps;
    if (ports >= spec.cores) {
      for (auto sp : spines[pod])
        for (auto c : cores) topo.add_link(sp, c, kind, up_Bps / spec.cores, lat);
      continue;
    }
    const auto k = static_cast<std::int32_t>(std::max(std::round(ports), 1.0));
    for (std::int32_t s = 0; s < spec.spines; ++s)
      for (std::int32_t j = 0; j < k; ++j)
        topo.add_link(spines[pod][static_cast<std::size_t>(s)],
                      cores[static_cast<std::size_t>((s * k + j) % spec.cores)], kind, up_Bps / k,
                      lat);
  }
}

}  // namespace meshsim
