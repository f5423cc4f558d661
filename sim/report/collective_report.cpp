#include "report/collective_report.hpp"

#include <fmt/format.h>

#include "core/enum_names.hpp"

namespace meshsim {

double algbw_Bps(const CollectiveSweepRow& row) {
  return row.time_s > 0 ? row.bytes / row.time_s : 0.0;
}

double busbw_Bps(const CollectiveSweep& sweep, const CollectiveSweepRow& row) {
  return algbw_Bps(row) * busbw_factor(sweep.op, sweep.ranks);
}

std::string collective_text(const CollectiveSweep& sweep) {
  std::string out = fmt::format("# meshsim collective: {} on {} ranks of {} ({} GPUs)\n",
                                name_of(sweep.op), sweep.ranks, sweep.cluster, sweep.cluster_gpus);
  out += fmt::format("# {:>14} {:>12} {:>6} {:>12} {:>12} {:>12}  {}\n", "size(B)", "count", "type",
                     "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm");
  // nccl-tests' count column is elements of its float type.
  for (const auto& row : sweep.rows)
    out += fmt::format("  {:>14.0f} {:>12.0f} {:>6} {:>12.2f} {:>12.2f} {:>12.2f}  {}\n", row.bytes,
                       row.bytes / 4, "float", row.time_s * 1e6, algbw_Bps(row) / 1e9,
                       busbw_Bps(sweep, row) / 1e9, row.algo);
  return out;
}

Json collective_json(const CollectiveSweep& sweep) {
  Json rows = Json::array();
  for (const auto& row : sweep.rows)
    rows.push_back({{"bytes", row.bytes},
                    {"time_s", row.time_s},
                    {"algbw_Bps", algbw_Bps(row)},
                    {"busbw_Bps", busbw_Bps(sweep, row)},
                    {"algo", row.algo}});
  Json j;
  j["op"] = std::string(name_of(sweep.op));
  j["ranks"] = sweep.ranks;
  j["rows"] = rows;
  return j;
}

}  // namespace meshsim
