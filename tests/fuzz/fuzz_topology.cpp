// Fuzzes the cluster loader (explicit and parametric files, GPU specs, fabrics), then runs a
// short training step on what it accepts (up to 64 GPUs: every collective of the step is priced
// on the cluster's links).
#include "fuzz_common.hpp"
#include "fuzz_sim_fixture.hpp"
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
    if (topo.gpu_count() <= 64) meshsim::fuzz::train_step(topo);
  });
}
