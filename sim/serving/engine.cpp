#include "serving/engine.hpp"

#include <algorithm>
#include <array>

#include "core/enum_names.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"

namespace meshsim {

DType default_kv_dtype(const EngineProfile& engine, DType weights) {
  return engine.fp8_kv_with_fp8_weights && weights == DType::fp8 ? DType::fp8 : DType::bf16;
}

std::string_view name_of(Admission a) {
  switch (a) {
    case Admission::optimistic:
      return "optimistic";
    case Admission::reserve:
      return "reserve";
    case Admission::max_utilization:
      return "max_utilization";
    case Admission::ratio:
      return "ratio";
  }
  return "?";
}

std::string_view name_of(Preemption p) {
  switch (p) {
    case Preemption::recompute:
      return "recompute";
    case Preemption::swap:
      return "swap";
  }
  return "?";
}

std::string_view name_of(KvBudget b) {
  switch (b) {
    case KvBudget::total_fraction:
      return "total_fraction";
    case KvBudget::free_fraction:
      return "free_fraction";
    case KvBudget::static_fraction:
      return "static_fraction";
  }
  return "?";
}

namespace {

constexpr std::array kAdmissions{Admission::optimistic, Admission::reserve,
                                 Admission::max_utilization, Admission::ratio};
constexpr std::array kBudgets{KvBudget::total_fraction, KvBudget::free_fraction,
                              KvBudget::static_fraction};
constexpr std::array kPreemptions{Preemption::recompute, Preemption::swap};

}  // namespace

Admission admission_flag(const std::string& text) {
  if (const auto a = parse_by_name<Admission>(kAdmissions, text)) return *a;
  throw Error("", "--admission", "'" + text + "' is not one of " + joined_names(kAdmissions));
}

namespace {

template <class E, std::size_t N>
E enum_field(const JsonRef& v, const std::array<E, N>& all) {
  const auto text = v.string();
  if (const auto e = parse_by_name<E>(all, text)) return *e;
  v.fail("'" + text + "' is not one of " + joined_names(all));
}

void read_scheduler(const JsonRef& ref, SchedulerOptions& s) {
  ObjectReader r(ref);
  s.admission = enum_field(r.required("admission"), kAdmissions);
  s.max_seqs = r.required("max_seqs").integer_in(1, 1 << 20);
  s.max_batch_tokens = r.required("max_batch_tokens").integer_in(1, 1 << 24);
  s.block_size = r.required("block_size").integer_in(1, 4096);
  const auto w = r.required("watermark");
  s.watermark = w.non_negative_number();
  if (s.watermark >= 1) w.fail("must be in [0, 1)");
  // A reserved request must be admissible into an empty cache (capacity checks use all blocks).
  if (s.admission == Admission::reserve && s.watermark > 0)
    w.fail("must be 0 with reserve admission (the whole request is reserved; no watermark)");
  // Optional: preemption by recompute unless the file says swap.
  if (auto p = r.optional("preemption")) s.preemption = enum_field(*p, kPreemptions);
  if (auto g = r.optional("swap_space_gb")) {
    const double gb = g->non_negative_number();
    if (gb > 4096) g->fail("must be at most 4096 GB of host memory per GPU");
    s.swap_space_bytes = gb * (1ull << 30);
  }
  // Optional: iterations mix prefill chunks and decodes unless the file says otherwise.
  if (auto m = r.optional("mixed_batches")) s.mixed_batches = m->boolean();
  // The new-token-ratio estimate: required with ratio admission, refused without it.
  const auto ratio = r.optional("new_token_ratio");
  if (s.admission == Admission::ratio && !ratio)
    r.required("new_token_ratio");  // fails: names the missing key
  if (ratio) {
    if (s.admission != Admission::ratio) ratio->fail("only applies to ratio admission");
    ObjectReader q(*ratio);
    const auto unit = [](const JsonRef& v) {
      const double x = v.positive_number();
      if (x > 1) v.fail("must be in (0, 1]");
      return x;
    };
    s.ratio.init = unit(q.required("init"));
    const auto min = q.required("min");
    s.ratio.min = unit(min);
    if (s.ratio.min > s.ratio.init) min.fail("must not exceed init");
    s.ratio.decay_steps = q.required("decay_steps").integer_in(1, 1 << 24);
    s.ratio.retract_steps = q.required("retract_steps").integer_in(0, 1 << 20);
    s.ratio.clip_tokens = q.required("clip_tokens").integer_in(1, 1 << 24);
    q.finish();
  }
  r.finish();
}

}  // namespace

EngineProfile read_engine(const JsonRef& ref) {
  ObjectReader r(ref);
  EngineProfile e;
  e.file = ref.file();
  e.name = r.required("name").string();
  if (e.name.empty()) r.required("name").fail("must not be empty");
  e.description = r.required("description").string();
  for (const auto& s : r.required("sources").non_empty_array()) e.sources.push_back(s.string());
  read_scheduler(r.required("scheduler"), e.scheduler);
  {
    ObjectReader kv(r.required("kv_cache"));
    e.scheduler.kv_budget = enum_field(kv.required("budget"), kBudgets);
    const auto f = kv.required("fraction");
    e.scheduler.gpu_memory_utilization = f.positive_number();
    if (e.scheduler.gpu_memory_utilization > 1) f.fail("must be in (0, 1]");
    // Optional: the fraction by the replica's TP degree, as (smallest TP, fraction) pairs.
    if (auto t = kv.optional("fraction_by_tp")) {
      for (const auto& pair : t->non_empty_array()) {
        const auto items = pair.array();
        if (items.size() != 2) pair.fail("expected [smallest TP, fraction]");
        const auto tp = items[0].integer_in(1, 1 << 20);
        const double x = items[1].positive_number();
        if (x > 1) items[1].fail("must be in (0, 1]");
        auto& table = e.scheduler.memory_fraction_by_tp;
        if (table.empty() ? tp != 1 : tp <= table.back().first)
          items[0].fail(table.empty() ? "the first entry must be for TP 1"
                                      : "TP degrees must increase");
        table.emplace_back(tp, x);
      }
    }
    e.fp8_kv_with_fp8_weights = kv.required("fp8_with_fp8_weights").boolean();
    // Optional: automatic prefix caching (off unless the file turns it on).
    if (auto pc = kv.optional("prefix_caching")) e.scheduler.prefix_caching = pc->boolean();
    kv.finish();
  }
  {
    ObjectReader g(r.required("cuda_graphs"));
    const auto sizes = g.required("capture_sizes");
    for (const auto& v : sizes.array()) {
      const auto n = v.integer_in(1, 1 << 16);
      if (!e.scheduler.cuda_graph_sizes.empty() && n <= e.scheduler.cuda_graph_sizes.back())
        v.fail("capture sizes must increase");
      e.scheduler.cuda_graph_sizes.push_back(n);
    }
    g.finish();
  }
  // Optional: an engine without a measurement of its host work has none modelled (its file's
  // description says so).
  if (auto c = r.optional("cpu_overhead")) {
    ObjectReader cr(*c);
    auto ms = [&](const char* key) {
      const auto v = cr.required(key);
      const double x = v.non_negative_number();
      if (x > 1000) v.fail("more than a second per iteration");
      return x * 1e-3;
    };
    e.scheduler.cpu_fixed_s = ms("fixed_ms");
    e.scheduler.cpu_multi_gpu_extra_s = ms("multi_gpu_extra_ms");
    e.scheduler.cpu_per_sequence_s = ms("per_sequence_ms");
    cr.finish();
  }
  r.finish();
  return e;
}

EngineProfile load_engine(const std::string& path) {
  const Json doc = load_json_file(path);
  return read_engine(JsonRef::root(doc, path));
}

EngineProfile resolve_engine(const std::string& name_or_file) {
  if (const auto* e = bundled_engine(name_or_file)) return *e;
  require_bundled_name_or_file(name_or_file, "engine", bundled_engine_names());
  return load_engine(name_or_file);
}

}  // namespace meshsim
