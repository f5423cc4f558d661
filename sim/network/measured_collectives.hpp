#pragma once
// Measured NCCL kernel times against meshsim's collective price: Vidur's all-reduce and
// send/recv sweeps on DGX H100 and DGX A100 nodes (validation/collectives/vidur-nccl.json,
// converted from ../shared/measurements by tools/convert_vidur.py), each priced as `meshsim
// collective` prices the same op, ranks and size on the bundled cluster file (NCCL's algorithm
// and protocol choice, nothing fitted). The tables of validation/collectives-vidur.md.
#include <cstdint>
#include <string>
#include <vector>

#include "network/collective.hpp"

namespace meshsim {

struct MeasuredCollective {
  std::string system;    // Vidur's node type (h100_dgx, a100_dgx)
  std::string topology;  // the bundled cluster file it is priced on
  std::int32_t nodes = 1;
  CollectiveOp op = CollectiveOp::all_reduce;
  std::vector<std::int32_t> ranks;
  double bytes = 0, measured_s = 0;
  double predicted_s = 0;
  std::string chosen;  // "algorithm/protocol" of the price
  double error() const { return predicted_s / measured_s - 1.0; }
  // "8 GPUs, 1 node" and the like.
  std::string layout() const;
};

// Reads the converted file strictly (an Error names the file and the JSON path) and prices every
// row; cluster files resolve against `root`/topologies/.
std::vector<MeasuredCollective> price_measured_collectives(const std::string& path,
                                                           const std::string& root);

// The size band of a message: below 1 MiB, 1–16 MiB, 16–64 MiB, 64 MiB and up.
std::string collective_size_band(double bytes);

// validation/collectives-vidur.md: `preamble`, then per node type, op and layout the error by size
// band (count, signed median, median / p95 / max |error|).
std::string measured_collectives_markdown(const std::vector<MeasuredCollective>& rows,
                                          const std::string& preamble);

}  // namespace meshsim
