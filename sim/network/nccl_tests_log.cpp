#include "network/nccl_tests_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/physical_limits.hpp"

namespace meshsim {
namespace {

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::optional<double> number(const std::string& s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<CollectiveOp> op_of_binary(std::string name) {
  if (auto p = name.rfind('/'); p != std::string::npos) name = name.substr(p + 1);
  if (name.ends_with("_perf")) name.resize(name.size() - 5);
  if (name == "alltoall") name = "all_to_all";
  if (name == "sendrecv") name = "send_recv";
  return parse_collective_op(name);
}

}  // namespace

NcclTestsLog read_nccl_tests_log(const std::string& path, const std::string& op_hint) {
  return parse_nccl_tests_log(read_input_file(path), path, op_hint);
}

NcclTestsLog parse_nccl_tests_log(const std::string& text, const std::string& path,
                                  const std::string& op_hint) {
  // A hint is checked whether or not the log names its collective (issue 19: --nccl-op frob
  // was ignored on a log that named one).
  std::optional<CollectiveOp> hinted;
  if (!op_hint.empty()) {
    hinted = parse_collective_op(op_hint);
    if (!hinted) throw Error("", "--nccl-op", "'" + op_hint + "' is not a collective");
  }
  std::istringstream in(text);
  NcclTestsLog log;
  log.file = path;
  std::optional<CollectiveOp> op;
  std::set<std::string> hosts;
  std::int32_t ranks = 0, ngpus_header = 0;
  std::string line;
  std::int64_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    const auto where = "line " + std::to_string(no);
    const auto t = tokens(line);
    if (t.empty()) continue;
    if (t[0] == "#" || t[0].front() == '#') {
      // "# Collective test starting: all_reduce_perf"
      if (const auto p = line.find("Collective test starting:"); p != std::string::npos) {
        const auto name = tokens(line.substr(p + 25));
        if (!name.empty()) op = op_of_binary(name.front());
      }
      // "#  Rank  0 Group  0 Pid 1234 on host device  0 [0x18] NVIDIA H100 80GB HBM3"
      if (t.size() > 8 && t[1] == "Rank") {
        ++ranks;
        for (std::size_t i = 2; i + 1 < t.size(); ++i)
          if (t[i] == "on") hosts.insert(t[i + 1]);
        if (log.gpu.empty())
          if (const auto b = line.find(']'); b != std::string::npos) {
            log.gpu = line.substr(b + 1);
            log.gpu.erase(0, log.gpu.find_first_not_of(' '));
          }
      }
      for (std::size_t i = 0; i + 1 < t.size(); ++i)
        if (t[i] == "nGpus")
          if (auto v = number(t[i + 1]); v && *v >= 1 && *v <= 1 << 18)
            ngpus_header = static_cast<std::int32_t>(*v);
      continue;
    }
    // A result row starts with two integers: size in bytes and element count.
    const auto size = number(t[0]);
    if (!size || t.size() < 2 || !number(t[1])) continue;
    if (t.size() < 11) throw Error(path, where, "result row with too few columns");
    const std::size_t n = t.size();
    // Range checks before anything is fitted (issue 19: a row of 1e23 bytes was fitted).
    // nccl-tests sweeps up to a few GiB; 2^44 bytes (16 TiB) is past any GPU's memory.
    if (*size < 0 || *size != std::floor(*size) || *size > 0x1p44)
      throw Error(path, where, "size '" + t[0] + "' is not a byte count from 0 to 2^44 (16 TiB)");
    NcclTestsRow row;
    row.bytes = *size;
    const double count = number(t[1]).value_or(0);
    if (count < 0 || count > 0x1p44)
      throw Error(path, where, "element count '" + t[1] + "' is not from 0 to 2^44");
    row.count = static_cast<std::int64_t>(count);
    row.type = t[2];
    const auto time = number(t[n - 8]), algbw = number(t[n - 7]), busbw = number(t[n - 6]);
    if (!time || !algbw || !busbw || *time <= 0)
      throw Error(path, where, "cannot read the out-of-place time, algbw and busbw");
    if (*time > 1e12)
      throw Error(path, where, "out-of-place time " + t[n - 8] + " µs is more than 10^12 µs");
    if (*algbw < 0 || *busbw < 0 || *algbw > kMaxBandwidth_GBps || *busbw > kMaxBandwidth_GBps)
      throw Error(path, where,
                  fmt::format("algbw {} and busbw {} GB/s must lie from 0 to {:g}", t[n - 7],
                              t[n - 6], kMaxBandwidth_GBps));
    row.time_us = *time;
    row.algbw_GBps = *algbw;
    row.busbw_GBps = *busbw;
    log.rows.push_back(row);
  }
  if (log.rows.empty()) throw Error(path, "", "no result rows (is this nccl-tests output?)");
  if (!op) op = hinted;
  if (!op)
    throw Error(path, "",
                "the log does not say which collective it measured; give it with --nccl-op");
  log.op = *op;
  log.ranks = ranks > 0 ? ranks : ngpus_header;
  if (log.ranks <= 0) throw Error(path, "", "no '# Rank' device lines and no nGpus in the header");
  log.nodes = std::max<std::int32_t>(1, static_cast<std::int32_t>(hosts.size()));
  return log;
}

}  // namespace meshsim
