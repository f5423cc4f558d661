// Fuzzes the NCCL topology dump reader (`calibrate nccl-topo`): any XML text either becomes a
// cluster file the cluster loader accepts, or an Error naming the dump (a conversion that the
// loader then refuses is a finding: the error would blame the output, not the dump's element).
#include "fuzz_common.hpp"
#include "topology/nccl_topo_xml.hpp"
#include "topology/topology_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto doc = meshsim::nccl_topo_text_to_topology(text, "fuzz.xml", {});
    try {
      (void)meshsim::load_topology_json(doc, "fuzz.xml (converted)");
    } catch (const meshsim::Error& e) {
      // A GPU with no path to the others is the dump's own shape (an isolated device); anything
      // else means the converter wrote what the loader refuses.
      if (std::string(e.what()).find("cannot reach GPU") == std::string::npos) __builtin_trap();
    }
  });
}
