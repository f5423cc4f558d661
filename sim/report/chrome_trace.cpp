#include "report/chrome_trace.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <string_view>

namespace meshsim {
namespace {

using Buffer = fmt::memory_buffer;

// Appends a JSON string literal (the op names are identifiers, but a model or stack file may
// name ops).
void quoted(Buffer& b, std::string_view s) {
  b.push_back('"');
  // The usual case, an identifier, in one append.
  if (s.find_first_of("\"\\") == std::string_view::npos &&
      std::none_of(s.begin(), s.end(),
                   [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    b.append(s);
    b.push_back('"');
    return;
  }
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      b.push_back('\\');
      b.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(fmt::appender(b), "\\u{:04x}",
                     static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      b.push_back(c);
    }
  }
  b.push_back('"');
}

// What an op's unique name says ("F3.L12.qkv": forward of micro-batch 3, layer 12, the QKV
// segment; "B3.L12.tp_qkv", "grads.c0.L5", "params.L5", "optimizer"), so slices can be named by
// kind and Perfetto can aggregate them.
struct OpName {
  std::string_view part;   // "qkv", "tp_qkv", "embed", "send", "optimizer", ...
  const char* phase = "";  // forward, backward, weight_grad or ""
  long microbatch = -1, layer = -1;
};

long number_after(std::string_view s, std::size_t from) {
  long v = 0;
  bool any = false;
  for (std::size_t i = from; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    v = v * 10 + (s[i] - '0');
    any = true;
  }
  return any ? v : -1;
}

OpName parse_op_name(std::string_view name) {
  OpName n;
  std::size_t pos = 0;
  auto next = [&]() -> std::string_view {
    const auto dot = name.find('.', pos);
    const auto seg = name.substr(pos, dot == std::string_view::npos ? name.npos : dot - pos);
    pos = dot == std::string_view::npos ? name.size() : dot + 1;
    return seg;
  };
  auto first = next();
  if (first.size() > 1 && (first[0] == 'F' || first[0] == 'B' || first[0] == 'W') &&
      number_after(first, 1) >= 0) {
    n.phase = first[0] == 'F' ? "forward" : first[0] == 'B' ? "backward" : "weight_grad";
    n.microbatch = number_after(first, 1);
    first = next();
  } else if (first == "grads" || first == "params") {
    n.part = first;
    if (const auto l = name.rfind(".L"); l != std::string_view::npos)
      n.layer = number_after(name, l + 2);
    return n;
  }
  if (first.size() > 1 && first[0] == 'L' && number_after(first, 1) >= 0) {
    n.layer = number_after(first, 1);
    first = next();
  }
  n.part = first.empty() ? name : first;
  return n;
}

}  // namespace

void write_chrome_trace(const Trace& trace, const ReplayResult& replay, std::ostream& out) {
  // Written event by event into a buffer flushed every MiB, with no JSON document in memory: a
  // --full trace of a large run has millions of events (tests/report/chrome_trace_test.cpp
  // bounds the memory, bench_training the time).
  const auto& g = trace.graph;
  Buffer b;
  auto it = fmt::appender(b);
  bool first = true;
  auto begin_event = [&] {
    if (b.size() > (std::size_t{1} << 20)) {
      out.write(b.data(), static_cast<std::streamsize>(b.size()));
      b.clear();
    }
    if (!first) b.push_back(',');
    b.push_back('\n');
    first = false;
  };
  fmt::format_to(it, FMT_COMPILE("{{\"displayTimeUnit\": \"ms\", \"traceEvents\": ["));
  std::set<std::int32_t> ranks;
  for (std::uint32_t s = 0; s < g.stream_count(); ++s) {
    const auto& st = g.stream(StreamId{s});
    if (st.ops.empty()) continue;
    ranks.insert(st.rank);
    begin_event();
    fmt::format_to(
        it,
        FMT_COMPILE(
            R"({{"name": "thread_name", "ph": "M", "pid": {}, "tid": {}, "args": {{"name": "{}"}}}})"),
        st.rank, s, stream_kind_name(st.kind));
    begin_event();
    fmt::format_to(
        it,
        FMT_COMPILE(
            R"({{"name": "thread_sort_index", "ph": "M", "pid": {}, "tid": {}, "args": {{"sort_index": {}}}}})"),
        st.rank, s, static_cast<int>(st.kind));
  }
  for (auto r : ranks) {
    begin_event();
    fmt::format_to(
        it,
        FMT_COMPILE(
            R"({{"name": "process_name", "ph": "M", "pid": {}, "args": {{"name": "rank {}"}}}})"),
        r, r);
  }
  // Times in whole nanoseconds, written as microseconds with three decimals: a slice's end is
  // start + duration exactly, so back-to-back ops on a stream never overlap by a rounding
  // (rounding start and duration separately did).
  auto ns = [](Time t) { return (t.picoseconds() + 500) / 1000; };
  // Counts as integers (fixed-precision formatting of large doubles is fmt's slow path).
  auto whole = [](double v) {
    return v < 9e18 ? std::llround(v) : std::numeric_limits<long long>::max();
  };
  auto put_us = [&](std::int64_t v) {
    fmt::format_to(it, FMT_COMPILE("{}.{:03}"), v / 1000, v % 1000);
  };
  // Slices named by kind: "tp_all_gather", "pp_send_recv"; compute by its segment, backward
  // and weight-gradient passes marked ("qkv", "qkv.backward"). Written straight into the buffer
  // (its parts are identifiers).
  auto put_comm_name = [&](const TraceOpInfo& info) {
    b.push_back('"');
    b.append(std::string_view(name_of(info.group)));
    b.push_back('_');
    b.append(info.kind);
    b.push_back('"');
  };
  auto put_slice_name = [&](const TraceOpInfo& info, const OpName& n) {
    if (info.comm) return put_comm_name(info);
    if (!*n.phase || n.phase[0] == 'f') return quoted(b, n.part);
    b.push_back('"');
    b.append(n.part);
    b.push_back('.');
    b.append(std::string_view(n.phase));
    b.push_back('"');
  };
  std::uint64_t flow = 0;
  for (std::uint32_t i = 0; i < g.op_count(); ++i) {
    const auto& op = g.op(OpId{i});
    const auto& t = replay.ops[i];
    const auto& info = trace.info[i];
    const auto& st = g.stream(op.stream);
    const auto n = parse_op_name(op.name);
    begin_event();
    b.append(std::string_view(R"({"name":)"));
    put_slice_name(info, n);
    const auto start = ns(t.start);
    fmt::format_to(it, FMT_COMPILE(R"(,"cat":"{}","ph":"X","pid":{},"tid":{},"ts":)"),
                   info.comm ? "comm" : "compute", st.rank, op.stream.value);
    put_us(start);
    b.append(std::string_view(R"(,"dur":)"));
    put_us(ns(t.end) - start);
    b.append(std::string_view(R"(,"args":{"op":)"));
    quoted(b, op.name);
    if (*n.phase) fmt::format_to(it, FMT_COMPILE(R"(,"phase":"{}")"), n.phase);
    if (n.microbatch >= 0) fmt::format_to(it, FMT_COMPILE(R"(,"microbatch":{})"), n.microbatch);
    if (n.layer >= 0) fmt::format_to(it, FMT_COMPILE(R"(,"layer":{})"), n.layer);
    if (info.comm)
      fmt::format_to(it, FMT_COMPILE(R"(,"group":"{}","bytes":{})"), name_of(info.group),
                     whole(info.bytes));
    else if (info.model_flops > 0)
      fmt::format_to(it, FMT_COMPILE(R"(,"model_flops":{})"), whole(info.model_flops));
    if (info.recompute) b.append(std::string_view(R"(,"recompute":true)"));
    b.append(std::string_view("}}"));
    // A dependency on another rank's op (a pipeline send feeding the next stage): a flow arrow
    // from its end to this op's start, named by the dependency's kind.
    for (const auto dep : op.deps) {
      const auto& ds = g.stream(g.op(dep).stream);
      if (ds.rank == st.rank) continue;
      const auto& dt = replay.ops[dep.value];
      const auto& di = trace.info[dep.value];
      auto put_arrow = [&] {
        if (di.comm)
          put_comm_name(di);
        else
          b.append(std::string_view(R"("cross_rank")"));
      };
      ++flow;
      begin_event();
      b.append(std::string_view(R"({"name":)"));
      put_arrow();
      fmt::format_to(it, FMT_COMPILE(R"(,"cat":"flow","ph":"s","id":{},"pid":{},"tid":{},"ts":)"),
                     flow, ds.rank, g.op(dep).stream.value);
      put_us(ns(dt.end));
      b.append(std::string_view("}"));
      begin_event();
      b.append(std::string_view(R"({"name":)"));
      put_arrow();
      fmt::format_to(
          it, FMT_COMPILE(R"(,"cat":"flow","ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":)"),
          flow, st.rank, op.stream.value);
      put_us(start);
      b.append(std::string_view("}"));
    }
  }
  b.append(std::string_view("\n]}\n"));
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

}  // namespace meshsim
