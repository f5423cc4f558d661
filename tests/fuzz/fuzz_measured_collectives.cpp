// Fuzzes the measured-collectives reader (validation/collectives/vidur-nccl.json, written by
// tools/convert_vidur.py): a file is read strictly and every row it accepts is priced on the
// bundled cluster file it names, so an accepted row must have distinct ranks on that cluster and
// a finite, positive price with the algorithm and protocol it chose.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <set>

#include "fuzz_common.hpp"
#include "network/measured_collectives.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The reader takes a path: the input goes to a file of this process's own. Cluster files
  // resolve against the checkout (MESHSIM_SOURCE_DIR): the bundled DGX and SuperPOD files.
  static const std::string path =
      "/tmp/meshsim-fuzz-measured-collectives-" + std::to_string(::getpid());
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    for (const auto& r : meshsim::price_measured_collectives(path, MESHSIM_SOURCE_DIR)) {
      if (!std::isfinite(r.predicted_s) || !(r.predicted_s > 0)) __builtin_trap();
      if (!(r.measured_s > 0) || r.chosen.empty() || r.nodes < 1) __builtin_trap();
      if (r.ranks.size() < 2 ||
          std::set<std::int32_t>(r.ranks.begin(), r.ranks.end()).size() != r.ranks.size())
        __builtin_trap();
    }
  });
}
