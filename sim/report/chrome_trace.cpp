#include "report/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

namespace meshsim {
namespace {

// The bytes of a trace being written: a bump pointer into a block reserved ahead of each event
// (`room`), so each append is an unchecked memcpy of a known size; std::string's and fmt's
// appends check and call out of line per piece, which was most of the writer's time.
class Buffer {
 public:
  // Room for `n` more bytes; an event asks for it before writing its pieces.
  void room(std::size_t n) {
    if (size_ + n <= bytes_.size()) return;
    bytes_.resize(std::max(bytes_.size() * 2, size_ + n));
  }
  void put(char c) { bytes_[size_++] = c; }
  void put(std::string_view s) {
    std::memcpy(bytes_.data() + size_, s.data(), s.size());
    size_ += s.size();
  }
  // A whole number, by fmt's digit-pair table.
  void put_int(std::int64_t v) {
    const fmt::format_int f(v);
    put(std::string_view(f.data(), f.size()));
  }
  // Whole nanoseconds as microseconds with three decimals.
  void put_us(std::int64_t ns) {
    if (ns < 0) {
      put('-');
      ns = -ns;
    }
    put_int(ns / 1000);
    const auto frac = static_cast<int>(ns % 1000);
    char* d = bytes_.data() + size_;
    d[0] = '.';
    d[1] = static_cast<char>('0' + frac / 100);
    d[2] = static_cast<char>('0' + frac / 10 % 10);
    d[3] = static_cast<char>('0' + frac % 10);
    size_ += 4;
  }
  // Pieces written through fmt (the metadata events): room is asked for their size.
  template <typename... Args>
  void format(fmt::format_string<Args...> f, Args&&... args) {
    const auto text = fmt::format(f, std::forward<Args>(args)...);
    room(text.size());
    put(text);
  }
  std::string_view view() const { return {bytes_.data(), size_}; }
  std::size_t size() const { return size_; }
  void clear() { size_ = 0; }

 private:
  std::vector<char> bytes_ = std::vector<char>(std::size_t{2} << 20);
  std::size_t size_ = 0;
};

// Room a JSON string of `s` may need escaped (every byte as \u00XX) with its quotes.
std::size_t quoted_room(std::string_view s) {
  return 6 * s.size() + 2;
}

// Appends a JSON string literal (the op names are identifiers, but a model or stack file may
// name ops). Needs quoted_room(s).
void quoted(Buffer& b, std::string_view s) {
  b.put('"');
  // The usual case, an identifier, in one append.
  // (One pass: find_first_of runs a memchr over the set per character.)
  if (std::none_of(s.begin(), s.end(), [](char c) {
        return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
      })) {
    b.put(s);
    b.put('"');
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      b.put('\\');
      b.put(c);
    } else if (u < 0x20) {
      b.put("\\u00");
      b.put(kHex[u >> 4]);
      b.put(kHex[u & 15]);
    } else {
      b.put(c);
    }
  }
  b.put('"');
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

// The writer's output side: events are appended to a buffer, and each full buffer (1 MiB) is
// handed to a thread that writes it while the next one is filled, so the disk's time overlaps
// the formatting instead of adding to it (issue 18: --trace within 30 % of a --full run).
class TraceSink {
 public:
  explicit TraceSink(std::ostream& out) : out_(out), writer_([this] { drain(); }) {}
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;
  ~TraceSink() { finish(); }

  Buffer& buffer() { return filling_; }
  // Hands the buffer over when it is full (the writer takes it when it is free).
  void maybe_flush() {
    if (filling_.size() >= kFlushBytes) hand_over();
  }
  void finish() {
    if (done_) return;
    hand_over();
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    ready_.notify_one();
    writer_.join();
  }

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

  void hand_over() {
    std::unique_lock lock(mutex_);
    free_.wait(lock, [&] { return !full_; });
    // A copy, not a swap: the formatting side keeps one buffer (and its capacity) throughout;
    // a megabyte's memcpy is a small part of formatting it.
    writing_.clear();
    writing_.room(filling_.size());
    writing_.put(filling_.view());
    full_ = true;
    lock.unlock();
    ready_.notify_one();
    filling_.clear();
  }
  void drain() {
    for (;;) {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return full_ || done_; });
      if (!full_) return;  // done, nothing left
      lock.unlock();
      const auto bytes = writing_.view();
      out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      lock.lock();
      full_ = false;
      lock.unlock();
      free_.notify_one();
    }
  }

  std::ostream& out_;
  Buffer filling_, writing_;
  std::mutex mutex_;
  std::condition_variable ready_, free_;
  bool full_ = false, done_ = false;
  std::thread writer_;  // last: started once the members it uses exist
};

}  // namespace

void write_chrome_trace(const Trace& trace, const ReplayResult& replay, std::ostream& out) {
  // Written event by event, with no JSON document in memory: a --full trace of a large run has
  // millions of events (tests/report/chrome_trace_test.cpp bounds the memory, bench_training the
  // time).
  const auto& g = trace.graph;
  TraceSink sink(out);
  Buffer& b = sink.buffer();
  bool first = true;
  // Every event asks for room for its fixed parts (numbers and keys, well under 512 bytes) and
  // for its names.
  auto begin_event = [&](std::size_t names) {
    sink.maybe_flush();
    b.room(512 + names);
    if (!first) b.put(',');
    b.put('\n');
    first = false;
  };
  b.format("{{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
  std::set<std::int32_t> ranks;
  for (std::uint32_t s = 0; s < g.stream_count(); ++s) {
    const auto& st = g.stream(StreamId{s});
    if (st.ops.empty()) continue;
    ranks.insert(st.rank);
    begin_event(0);
    b.format(
        R"({{"name": "thread_name", "ph": "M", "pid": {}, "tid": {}, "args": {{"name": "{}"}}}})",
        st.rank, s, stream_kind_name(st.kind));
    begin_event(0);
    b.format(
        R"({{"name": "thread_sort_index", "ph": "M", "pid": {}, "tid": {}, "args": {{"sort_index": {}}}}})",
        st.rank, s, static_cast<int>(st.kind));
  }
  for (auto r : ranks) {
    begin_event(0);
    b.format(R"({{"name": "process_name", "ph": "M", "pid": {}, "args": {{"name": "rank {}"}}}})",
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
  // Slices named by kind: "tp_all_gather", "pp_send_recv"; compute by its segment, backward
  // and weight-gradient passes marked ("qkv", "qkv.backward").
  auto comm_name_room = [](const TraceOpInfo& info) { return quoted_room(info.kind) + 16; };
  auto put_comm_name = [&](const TraceOpInfo& info) {
    b.put('"');
    b.put(name_of(info.group));
    b.put('_');
    b.put(info.kind);
    b.put('"');
  };
  auto put_slice_name = [&](const TraceOpInfo& info, const OpName& n) {
    if (info.comm) return put_comm_name(info);
    if (!*n.phase || n.phase[0] == 'f') return quoted(b, n.part);
    b.put('"');
    b.put(n.part);
    b.put('.');
    b.put(std::string_view(n.phase));
    b.put('"');
  };
  auto put_lane = [&](std::int32_t rank, std::uint32_t stream) {
    b.put(R"(,"pid":)");
    b.put_int(rank);
    b.put(R"(,"tid":)");
    b.put_int(stream);
    b.put(R"(,"ts":)");
  };
  // Each op's rank, in one array: the dependency test below reads it for ops anywhere in the
  // graph, which through the ops themselves was a cache miss per dependency.
  std::vector<std::int32_t> rank_of(g.op_count());
  for (std::uint32_t i = 0; i < g.op_count(); ++i) rank_of[i] = g.stream(g.op(OpId{i}).stream).rank;
  std::uint64_t flow = 0;
  for (std::uint32_t i = 0; i < g.op_count(); ++i) {
    const auto& op = g.op(OpId{i});
    const auto& t = replay.ops[i];
    const auto& info = trace.info[i];
    const auto& st = g.stream(op.stream);
    const auto n = parse_op_name(op.name);
    // The op's name at most twice (as the slice's part and in args), the kind once.
    begin_event(2 * quoted_room(op.name) + comm_name_room(info));
    b.put(R"({"name":)");
    put_slice_name(info, n);
    b.put(info.comm   ? std::string_view(R"(,"cat":"comm","ph":"X")")
          : info.host ? std::string_view(R"(,"cat":"host","ph":"X")")
                      : std::string_view(R"(,"cat":"compute","ph":"X")"));
    put_lane(st.rank, op.stream.value);
    const auto start = ns(t.start);
    b.put_us(start);
    b.put(R"(,"dur":)");
    b.put_us(ns(t.end) - start);
    // A compute slice's own name is its name, phase, micro-batch and layer, all written; a
    // communication slice keeps it ("F3.L12.tp_qkv": which segment the collective serves).
    b.put(R"(,"args":{)");
    bool any = false;
    auto field = [&](std::string_view key) {
      if (any) b.put(',');
      any = true;
      b.put(key);
    };
    if (info.comm) {
      field(R"("op":)");
      quoted(b, op.name);
    }
    if (*n.phase) {
      field(R"("phase":")");
      b.put(std::string_view(n.phase));
      b.put('"');
    }
    if (n.microbatch >= 0) {
      field(R"("microbatch":)");
      b.put_int(n.microbatch);
    }
    if (n.layer >= 0) {
      field(R"("layer":)");
      b.put_int(n.layer);
    }
    if (info.comm) {
      field(R"("group":")");
      b.put(name_of(info.group));
      b.put(R"(","bytes":)");
      b.put_int(whole(info.bytes));
    } else if (info.model_flops > 0) {
      field(R"("model_flops":)");
      b.put_int(whole(info.model_flops));
    }
    if (info.recompute) field(R"("recompute":true)");
    // Interference made visible: how much longer a kernel ran than alone (interference_s), and
    // the time a collective lost to HBM sharing and waited for a kernel's SMs before it started
    // (their sum is comm_interference_s).
    const auto wait_field = [&](const std::vector<float>& v, const char* name) {
      if (i >= v.size() || v[i] < 500.0F) return;  // under half a nanosecond: none
      field(name);
      b.put_us(std::llround(static_cast<double>(v[i]) / 1000.0));
    };
    if (!info.comm && t.end - t.start > op.duration) {
      field(R"("interference_us":)");
      b.put_us(ns(t.end - t.start - op.duration));
    } else if (info.comm) {
      wait_field(replay.hbm_wait_ps, R"("hbm_wait_us":)");
      wait_field(replay.sm_wait_ps, R"("sm_wait_us":)");
    }
    b.put("}}");
    // A dependency on another rank's op (a pipeline send feeding the next stage): a flow arrow
    // from its end to this op's start, named by the dependency's kind.
    for (const auto dep : op.deps) {
      if (rank_of[dep.value] == st.rank) continue;
      const auto& ds = g.stream(g.op(dep).stream);
      const auto& dt = replay.ops[dep.value];
      const auto& di = trace.info[dep.value];
      auto put_arrow = [&] {
        if (di.comm)
          put_comm_name(di);
        else
          b.put(R"("cross_rank")");
      };
      ++flow;
      begin_event(comm_name_room(di));
      b.put(R"({"name":)");
      put_arrow();
      b.put(R"(,"cat":"flow","ph":"s","id":)");
      b.put_int(static_cast<std::int64_t>(flow));
      put_lane(ds.rank, g.op(dep).stream.value);
      b.put_us(ns(dt.end));
      b.put('}');
      begin_event(comm_name_room(di));
      b.put(R"({"name":)");
      put_arrow();
      b.put(R"(,"cat":"flow","ph":"f","bp":"e","id":)");
      b.put_int(static_cast<std::int64_t>(flow));
      put_lane(st.rank, op.stream.value);
      b.put_us(start);
      b.put('}');
    }
  }
  b.room(8);
  b.put("\n]}\n");
  sink.finish();
}

}  // namespace meshsim
