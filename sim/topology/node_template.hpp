#pragma once
// One node (a server, or an NVL72 rack) described once and stamped out N times. Vertex groups
// expand ("count": 8 turns "gpu" into gpu0..gpu7) and links connect groups by a pattern, so a
// DGX H100 fits in a screenful of JSON.
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "topology/topology.hpp"

namespace meshsim {

// Budgets on a cluster's size, checked before anything is expanded, so that a 700-byte file (an
// all_pairs between two 4,096-vertex groups: 16.7 M links) is an error with its estimate, not an
// out-of-memory. Measured: `topo` on 100,000 H100s (h100-16k.json at 12,500 nodes: 330 k
// vertices, 963 k links) peaks at 609 MB, ~0.6 KB per link with its share of vertices and routes;
// the limits allow 2^18 GPUs of that node (2.5 M links) and keep `topo` within ~2.7 GB.
inline constexpr std::int64_t kMaxVertices = std::int64_t{1} << 21;
inline constexpr std::int64_t kMaxLinks = std::int64_t{1} << 22;
inline constexpr double kBytesPerLink = 640;  // the measurement above, rounded up
// "16777216 links is more than the supported 4194304 (this would need ~10.7 GB at ~0.64 KB per
// link)".
std::string link_budget_error(std::int64_t links);
std::string vertex_budget_error(std::int64_t vertices);

struct LinkSpec {
  LinkKind kind = LinkKind::nvlink;
  double bandwidth_Bps = 0;
  Time latency;
};

// Reads "kind", exactly one of bandwidth_Bps / bandwidth_GBps (1e9 B/s) / bandwidth_Gbps (1e9
// bit/s), and exactly one of latency_s / latency_us / latency_ns, from an object reader.
LinkSpec read_link_spec(ObjectReader& r);

struct TemplateVertex {
  VertexKind kind;
  std::string name;
  std::int32_t node = 0;  // only the explicit whole-cluster form may set it
};

struct TemplateLink {
  std::uint32_t a = 0, b = 0;  // indices into NodeTemplate::vertices
  LinkSpec spec;
};

struct NodeTemplate {
  std::vector<TemplateVertex> vertices;
  std::vector<TemplateLink> links;
};

// Reads {"vertices": [...], "links": [...]} from an object reader. `allow_node_field` is true
// for the explicit form, where each vertex may say which node it belongs to.
NodeTemplate read_node_template(ObjectReader& r, bool allow_node_field);

// Adds one copy of the template as node `node`; vertex names get `prefix`. Returns the new
// vertex ids in template order.
std::vector<VertexId> instantiate(const NodeTemplate& t, Topology& topo, std::int32_t node,
                                  const std::string& prefix);

}  // namespace meshsim
