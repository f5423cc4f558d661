#pragma once
// An NCCL topology dump (the XML NCCL writes to NCCL_TOPO_DUMP_FILE: CPUs as NUMA domains, the
// PCIe tree with link speed and width, GPUs with their NVLinks, NICs) turned into a meshsim
// cluster file of that one node, in the explicit form (vertices and links written out).
#include <string>

#include "core/json_reader.hpp"

namespace meshsim {

struct NcclTopoOptions {
  std::string name = "nccl-topo-node";
  std::string gpu;  // catalogue name; empty: from the GPUs' SM version (90 → H100-SXM5-80GB)
};

// Errors (unreadable XML, no GPUs, unknown SM version without `gpu`) name the file.
Json nccl_topo_to_topology(const std::string& xml_path, const NcclTopoOptions& options);
// The same from the dump's text; `xml_path` names it in errors (fuzz_nccl_xml enters here).
Json nccl_topo_text_to_topology(const std::string& text, const std::string& xml_path,
                                const NcclTopoOptions& options);

}  // namespace meshsim
