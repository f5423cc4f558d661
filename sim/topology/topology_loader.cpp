#include "topology/topology_loader.hpp"

#include <filesystem>

#include "topology/fabric.hpp"
#include "topology/node_template.hpp"
#include "topology/router.hpp"

namespace meshsim {
namespace {

void read_header(ObjectReader& r, Topology& t) {
  t.name = r.required("name").string();
  if (auto d = r.optional("description")) t.description = d->string();
  if (auto s = r.optional("sources"))
    for (const auto& e : s->array()) t.sources.push_back(e.string());
  // A calibration profile measured on this cluster's nodes, relative to the file.
  if (auto c = r.optional("calibration")) {
    const auto rel = std::filesystem::path(c->string());
    t.calibration_file =
        (rel.is_absolute() ? rel : std::filesystem::path(c->file()).parent_path() / rel)
            .lexically_normal()
            .string();
  }
}

// A parametric file may take its node from a single-node file ("node_from": "dgx-h100.json"),
// so the node is described once. Returns that file's template and GPU.
struct NodeSource {
  NodeTemplate node;
  GpuSpec gpu;
};

NodeSource read_node_from(const JsonRef& ref, const std::string& file, int depth);

NodeSource read_node_object(ObjectReader& r, const JsonRef& where, const std::string& file,
                            int depth) {
  if (r.has("node_from")) {
    auto from = r.required("node_from");
    if (r.has("node")) from.fail("give either 'node' or 'node_from', not both");
    return read_node_from(from, file, depth);
  }
  auto node_ref = r.required("node");
  ObjectReader nr(node_ref);
  NodeSource src;
  src.gpu = read_gpu_spec(nr.required("gpu"));
  src.node = read_node_template(nr, false);
  nr.finish();
  (void)where;
  return src;
}

NodeSource read_node_from(const JsonRef& ref, const std::string& file, int depth) {
  if (depth > 4) ref.fail("node_from nests too deeply");
  const auto rel = ref.string();
  const auto path = (std::filesystem::path(file).parent_path() / rel).string();
  if (!std::filesystem::exists(path)) ref.fail("cannot find node file '" + path + "'");
  const Json doc = load_json_file(path);
  ObjectReader r(JsonRef::root(doc, path));
  Topology scratch;
  read_header(r, scratch);
  // The referenced file may itself be parametric; only its node matters here.
  for (const char* ignored : {"nodes", "fabric"}) (void)r.optional(ignored);
  NodeSource src = read_node_object(r, r.self(), path, depth + 1);
  r.finish();
  return src;
}

void check_connected(const Topology& t, const std::string& file) {
  if (t.gpu_count() == 0) throw Error(file, "/", "the cluster has no GPU");
  const auto unreachable = first_unreachable_gpu(t);
  if (unreachable)
    throw Error(file, "/",
                "GPU '" + t.vertex(*unreachable).name + "' cannot reach GPU '" +
                    t.vertex(t.gpus().front()).name + "' (no path of links)");
}

}  // namespace

Topology load_topology_json(const Json& doc, const std::string& file,
                            const TopologyOptions& options) {
  ObjectReader r(JsonRef::root(doc, file));
  Topology t;
  read_header(r, t);
  const bool parametric = r.has("node") || r.has("node_from") || r.has("fabric");
  if (!parametric) {
    if (options.nodes)
      throw Error(file, "--nodes",
                  "this is an explicit topology; --nodes needs a parametric file "
                  "(one with 'node' and 'fabric')");
    t.gpu = read_gpu_spec(r.required("gpu"));
    const NodeTemplate whole = read_node_template(r, true);
    r.finish();
    instantiate(whole, t, 0, "");
    check_connected(t, file);
    return t;
  }

  NodeSource src = read_node_object(r, r.self(), file, 0);
  t.gpu = src.gpu;
  // A file may reuse another's node with a different GPU (an HGX H200 is a DGX H100 with H200s).
  if (auto g = r.optional("gpu")) t.gpu = read_gpu_spec(*g);
  std::int64_t nodes = 1;
  if (auto n = r.optional("nodes")) nodes = n->positive_integer();
  const auto fabric_ref = r.required("fabric");
  const FabricSpec fabric = read_fabric_spec(fabric_ref);
  r.finish();
  if (options.nodes) {
    if (*options.nodes <= 0) throw Error(file, "--nodes", "must be a positive integer");
    nodes = *options.nodes;
  }
  std::int64_t gpus_per_node = 0, nics_per_node = 0;
  for (const auto& v : src.node.vertices) {
    gpus_per_node += v.kind == VertexKind::gpu;
    nics_per_node += v.kind == VertexKind::nic;
  }
  if (gpus_per_node == 0) throw Error(file, "/node/vertices", "the node has no GPU");
  // Compared by division: nodes × gpus_per_node can overflow for a node count near 2^63.
  if (nodes > kMaxGpus / gpus_per_node)
    throw Error(file, options.nodes ? "--nodes" : "/nodes",
                std::to_string(nodes) + " nodes of " + std::to_string(gpus_per_node) +
                    " GPUs is more than the supported " + std::to_string(kMaxGpus) + " GPUs");
  const auto node_vertices = static_cast<std::int64_t>(src.node.vertices.size());
  const auto node_links = static_cast<std::int64_t>(src.node.links.size());
  const std::string nodes_where = options.nodes ? "--nodes" : "/nodes";
  if (nodes > kMaxVertices / node_vertices)
    throw Error(file, nodes_where,
                std::to_string(nodes) + " nodes of " + std::to_string(node_vertices) +
                    " vertices: " + vertex_budget_error(nodes * node_vertices));
  if (nodes > kMaxLinks / std::max<std::int64_t>(node_links, 1))
    throw Error(file, nodes_where,
                std::to_string(nodes) + " nodes of " + std::to_string(node_links) +
                    " links: " + link_budget_error(nodes * node_links));
  if (nodes > 1 && fabric.kind == FabricKind::none)
    fabric_ref.fail("several nodes need a fabric (kind single_switch or fat_tree)");
  if (nodes > 1 && nics_per_node == 0)
    throw Error(file, "/node/vertices", "several nodes need NICs in the node to reach each other");

  std::vector<std::vector<VertexId>> nics(static_cast<std::size_t>(nodes));
  for (std::int32_t n = 0; n < nodes; ++n) {
    const auto ids = instantiate(src.node, t, n, "n" + std::to_string(n) + "/");
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (src.node.vertices[i].kind == VertexKind::nic) nics[n].push_back(ids[i]);
  }
  t.stride = Topology::NodeStride{true, src.node.vertices.size(), 2 * src.node.links.size()};
  build_fabric(fabric, nics, t);
  check_connected(t, file);
  return t;
}

Topology load_topology(const std::string& path, const TopologyOptions& options) {
  const Json doc = load_json_file(path);
  return load_topology_json(doc, path, options);
}

}  // namespace meshsim
