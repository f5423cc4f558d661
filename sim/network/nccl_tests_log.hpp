#pragma once
// The output of NVIDIA's nccl-tests (all_reduce_perf and friends) read as measured collective
// timings: the device lines give the ranks, the hosts and the GPU; each result row gives the
// message size S and the out-of-place time, algbw = S/t and busbw (doc/PERFORMANCE.md).
#include <cstdint>
#include <string>
#include <vector>

#include "network/collective.hpp"

namespace meshsim {

struct NcclTestsRow {
  double bytes = 0;
  std::int64_t count = 0;
  std::string type;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;
};

struct NcclTestsLog {
  std::string file;
  CollectiveOp op = CollectiveOp::all_reduce;
  std::int32_t ranks = 0, nodes = 0;
  std::string gpu;  // the device name of rank 0
  std::vector<NcclTestsRow> rows;
};

// The op comes from the "Collective test starting: X_perf" line when the log has one; otherwise
// `op_hint` (a collective name such as all_reduce) must give it. Errors name the file and line.
NcclTestsLog read_nccl_tests_log(const std::string& path, const std::string& op_hint = "");
// The same from the log's text; `path` names it in errors (fuzz_nccl_tests enters here).
NcclTestsLog parse_nccl_tests_log(const std::string& text, const std::string& path,
                                  const std::string& op_hint = "");

}  // namespace meshsim
