#pragma once
// One node (a server, or an NVL72 rack) described once and stamped out N times. Vertex groups
// expand ("count": 8 turns "gpu" into gpu0..gpu7) and links connect groups by a pattern, so a
// DGX H100 fits in a screenful of JSON.
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "topology/topology.hpp"

namespace meshsim {

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
