#include "report/chrome_trace.hpp"

#include <set>

#include "core/json_reader.hpp"

namespace meshsim {

void write_chrome_trace(const Trace& trace, const ReplayResult& replay, std::ostream& out) {
  const auto& g = trace.graph;
  Json events = Json::array();
  std::set<std::int32_t> ranks;
  for (std::uint32_t s = 0; s < g.stream_count(); ++s) {
    const auto& st = g.stream(StreamId{s});
    if (st.ops.empty()) continue;
    ranks.insert(st.rank);
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", st.rank},
                      {"tid", s},
                      {"args", {{"name", stream_kind_name(st.kind)}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", st.rank},
                      {"tid", s},
                      {"args", {{"sort_index", static_cast<int>(st.kind)}}}});
  }
  for (auto r : ranks)
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
  for (std::uint32_t i = 0; i < g.op_count(); ++i) {
    const auto& op = g.op(OpId{i});
    const auto& t = replay.ops[i];
    const auto& info = trace.info[i];
    Json args = {{"kind", info.kind}};
    if (info.comm) {
      args["group"] = name_of(info.group);
      args["bytes"] = info.bytes;
    } else if (info.model_flops > 0) {
      args["model_flops"] = info.model_flops;
    }
    if (info.recompute) args["recompute"] = true;
    const auto& st = g.stream(op.stream);
    events.push_back({{"name", op.name},
                      {"cat", info.comm ? "comm" : "compute"},
                      {"ph", "X"},
                      {"pid", st.rank},
                      {"tid", op.stream.value},
                      {"ts", static_cast<double>(t.start.picoseconds()) * 1e-6},
                      {"dur", static_cast<double>((t.end - t.start).picoseconds()) * 1e-6},
                      {"args", std::move(args)}});
  }
  out << Json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

}  // namespace meshsim
