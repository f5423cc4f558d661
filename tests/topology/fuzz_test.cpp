// Mutation fuzzing of the topology loader: every mutant of a bundled file must load or fail with
// a meshsim::Error (one line naming file and path), never crash, hang, or throw anything else.
// The sanitizer preset runs this too, so memory errors on odd inputs are caught.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "core/rng.hpp"
#include "json_mutation.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::mutate;
using meshsim::test::mutate_typed;
using meshsim::test::topology_path;

TEST_CASE("structural mutants of bundled topologies load or fail cleanly") {
  Rng rng(2026);
  int errors = 0, loaded = 0;
  for (const char* name : {"dgx-h100.json", "pcie-8gpu.json", "lab-2node-explicit.json",
                           "dgx-h100-superpod.json", "gb200-nvl72.json"}) {
    const auto path = topology_path(name);
    const Json original = load_json_file(path);
    for (int i = 0; i < 300; ++i) {
      Json doc = original;
      const auto mutations = 1 + rng.below(3);
      // Every other mutant keeps its JSON types (past the type checks to the range checks).
      for (std::uint64_t m = 0; m < mutations; ++m)
        i % 2 == 0 ? mutate_typed(doc, rng) : mutate(doc, rng);
      // Keep parametric mutants small (nodes is itself fuzzed in other mutants' values).
      TopologyOptions opt;
      if (doc.is_object() && (doc.contains("fabric") || doc.contains("node"))) opt.nodes = 2;
      try {
        load_topology_json(doc, path, opt);
        ++loaded;
      } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos);
        CHECK(!msg.empty());
        ++errors;
      }
    }
  }
  CHECK(errors > 100);  // the mutations do reach the checks
  CHECK(loaded > 10);   // and some mutants remain valid
}

TEST_CASE("byte-level mutants of a topology file fail cleanly") {
  Rng rng(7);
  const auto path = topology_path("dgx-h100.json");
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string alphabet = "{}[],:\"0-9.eE truefalsenull\\";
  for (int i = 0; i < 500; ++i) {
    std::string s = text;
    const auto edits = 1 + rng.below(4);
    for (std::uint64_t e = 0; e < edits && !s.empty(); ++e) {
      const auto pos = rng.below(s.size());
      switch (rng.below(3)) {
        case 0:
          s.erase(pos, 1 + rng.below(8));
          break;
        case 1:
          s.insert(pos, 1, alphabet[rng.below(alphabet.size())]);
          break;
        default:
          s[pos] = alphabet[rng.below(alphabet.size())];
          break;
      }
    }
    try {
      const Json doc = parse_json_text(s, path);
      load_topology_json(doc, path);
    } catch (const Error&) {
      // expected for most mutants
    }
  }
}
