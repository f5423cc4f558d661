// Mutation fuzzing of the topology loader: every mutant of a bundled file must load or fail with
// a meshsim::Error (one line naming file and path), never crash, hang, or throw anything else.
// The sanitizer preset runs this too, so memory errors on odd inputs are caught.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "core/rng.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;
using meshsim::test::topology_path;

namespace {

Json random_value(Rng& rng) {
  switch (rng.below(10)) {
    case 0:
      return nullptr;
    case 1:
      return rng.below(2) == 0;
    case 2:
      return 0;
    case 3:
      return -1;
    case 4:
      return 1e300;
    case 5:
      return static_cast<std::int64_t>(rng.below(5));
    case 6:
      return "gpu";
    case 7:
      return Json::array();
    case 8:
      return Json::object();
    default:
      return 0.5;
  }
}

// Replaces, removes or adds one thing somewhere in the document.
void mutate(Json& j, Rng& rng) {
  Json* at = &j;
  for (int depth = 0; depth < 8; ++depth) {
    if (!(at->is_object() || at->is_array()) || at->empty() || rng.below(4) == 0) break;
    auto it = at->begin();
    std::advance(it, static_cast<long>(rng.below(at->size())));
    if (!(it->is_object() || it->is_array()) || rng.below(3) == 0) {
      switch (rng.below(3)) {
        case 0:
          *it = random_value(rng);
          return;
        case 1:
          if (at->is_object()) {
            at->erase(it.key());
            return;
          }
          *it = random_value(rng);
          return;
        default:
          if (at->is_object())
            (*at)["fuzz_key"] = random_value(rng);
          else
            at->push_back(random_value(rng));
          return;
      }
    }
    at = &*it;
  }
  *at = random_value(rng);
}

}  // namespace

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
      for (std::uint64_t m = 0; m < mutations; ++m) mutate(doc, rng);
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
