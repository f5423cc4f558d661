// Fuzzes the cluster loader (explicit and parametric files, GPU specs, fabrics).
#include "fuzz_common.hpp"
#include "topology/topology_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::fuzz::parse(text);
    // Valid but large clusters (up to the 2^18-GPU limit) take seconds to build: keep the
    // fuzzer on the parsing, not on building big fabrics.
    if (doc.is_object() && doc.contains("nodes") && doc["nodes"].is_number() &&
        doc["nodes"].get<double>() > 64)
      return;
    const auto topo = meshsim::load_topology_json(doc, "fuzz.json");
    (void)topo.gpu_count();
  });
}
