#pragma once
// What `meshsim collective` prints: a size sweep of one collective, like nccl-tests (size, count,
// type, time, algbw, busbw) with the algorithm and protocol the model chose; as text or as one
// JSON document.
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "network/collective.hpp"

namespace meshsim {

struct CollectiveSweepRow {
  double bytes = 0;
  double time_s = 0;
  std::string algo;  // "ring/LL": algorithm/protocol
};

struct CollectiveSweep {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::size_t ranks = 0;
  std::string cluster;           // the cluster's name
  std::size_t cluster_gpus = 0;  // GPUs in the cluster
  std::vector<CollectiveSweepRow> rows;
};

// nccl-tests' figures: algbw = bytes / time, busbw = algbw × busbw_factor (0 for a zero time).
double algbw_Bps(const CollectiveSweepRow& row);
double busbw_Bps(const CollectiveSweep& sweep, const CollectiveSweepRow& row);

std::string collective_text(const CollectiveSweep& sweep);
// {"op", "ranks", "rows": [{"bytes", "time_s", "algbw_Bps", "busbw_Bps", "algo"}]}
Json collective_json(const CollectiveSweep& sweep);

}  // namespace meshsim
