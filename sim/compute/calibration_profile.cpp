#include "compute/calibration_profile.hpp"

#include "compute/kernel_params.hpp"
#include "core/enum_names.hpp"
#include "core/physical_limits.hpp"

namespace meshsim {
namespace {

DType read_dtype(const JsonRef& ref) {
  const auto s = ref.string();
  if (auto d = parse_dtype(s)) return *d;
  ref.fail("unknown dtype '" + s + "' (known: " + joined_names(kAllDTypes) + ")");
}

std::int64_t read_dim(ObjectReader& r, std::string_view key) {
  return r.required(key).positive_integer();
}

GemmPoint read_gemm_point(const JsonRef& ref) {
  ObjectReader r(ref);
  GemmPoint p;
  p.dtype = read_dtype(r.required("dtype"));
  p.shape.m = read_dim(r, "m");
  p.shape.n = read_dim(r, "n");
  p.shape.k = read_dim(r, "k");
  if (auto b = r.optional("batch")) p.shape.batch = b->positive_integer();
  p.flops_per_s = r.required("tflops").positive_at_most(kMaxPeak_TFLOPS) * 1e12;
  r.finish();
  return p;
}

AttentionPoint read_attention_point(const JsonRef& ref) {
  ObjectReader r(ref);
  AttentionPoint p;
  p.dtype = read_dtype(r.required("dtype"));
  p.shape.batch = read_dim(r, "batch");
  p.shape.seq_q = read_dim(r, "seq_q");
  p.shape.seq_kv = p.shape.seq_q;
  if (auto s = r.optional("seq_kv")) p.shape.seq_kv = s->positive_integer();
  p.shape.heads = read_dim(r, "heads");
  p.shape.kv_heads = p.shape.heads;
  if (auto kv = r.optional("kv_heads")) p.shape.kv_heads = kv->positive_integer();
  p.shape.head_dim = read_dim(r, "head_dim");
  p.shape.causal = r.required("causal").boolean();
  const auto dir = r.required("direction");
  const auto d = dir.string();
  if (d != "forward" && d != "backward") dir.fail("expected 'forward' or 'backward'");
  p.shape.backward = d == "backward";
  p.flops_per_s = r.required("tflops").positive_at_most(kMaxPeak_TFLOPS) * 1e12;
  r.finish();
  return p;
}

}  // namespace

CalibrationProfile read_calibration_profile(const JsonRef& root) {
  ObjectReader r(root);
  CalibrationProfile p;
  p.file = root.file();
  p.gpu = r.required("gpu").string();
  p.source = r.required("source").string();
  if (auto v = r.optional("launch_overhead_us"))
    p.launch_overhead = Time::from_seconds_ceil(v->number_in(0, kMaxLatency_s * 1e6) * 1e-6);
  if (auto v = r.optional("memory_bandwidth_GBps"))
    p.memory_bandwidth_Bps = v->positive_at_most(kMaxBandwidth_GBps) * 1e9;
  if (auto v = r.optional("gemm_beside_collective")) {
    const auto s = v->string();
    if (s != kLaunchedForAllSms && s != kPlannedForSmsLeft)
      v->fail("expected '" + std::string(kLaunchedForAllSms) + "' or '" +
              std::string(kPlannedForSmsLeft) + "'");
    p.gemm_launched_for_all_sms = s == kLaunchedForAllSms;
  }
  for (auto [key, field] : {std::pair{"kernel_gap_us", &CalibrationProfile::kernel_gap_s},
                            {"graph_kernel_gap_us", &CalibrationProfile::graph_kernel_gap_s},
                            {"host_launch_us", &CalibrationProfile::host_launch_s},
                            {"host_per_kernel_us", &CalibrationProfile::host_per_kernel_s}})
    if (auto v = r.optional(key)) p.*field = v->number_in(0, kMaxLatency_s * 1e6) * 1e-6;
  if (auto g = r.optional("gemm"))
    for (const auto& e : g->array()) p.gemm.push_back(read_gemm_point(e));
  if (auto l = r.optional("links")) p.links = read_link_calibration(*l);
  if (auto m = r.optional("model")) {
    (void)read_kernel_params(*m, generic_kernel_params());  // strict check now, applied later
    p.model = m->raw();
  }
  if (auto a = r.optional("attention"))
    for (const auto& e : a->array()) p.attention.push_back(read_attention_point(e));
  r.finish();
  return p;
}

CalibrationProfile load_calibration_profile(const std::string& path) {
  const Json doc = load_json_file(path);
  return read_calibration_profile(JsonRef::root(doc, path));
}

Json to_json(const CalibrationProfile& p) {
  Json j = {{"gpu", p.gpu}, {"source", p.source}};
  if (p.launch_overhead) j["launch_overhead_us"] = p.launch_overhead->seconds() * 1e6;
  if (p.memory_bandwidth_Bps) j["memory_bandwidth_GBps"] = *p.memory_bandwidth_Bps / 1e9;
  if (p.gemm_launched_for_all_sms)
    j["gemm_beside_collective"] =
        *p.gemm_launched_for_all_sms ? kLaunchedForAllSms : kPlannedForSmsLeft;
  if (p.kernel_gap_s) j["kernel_gap_us"] = *p.kernel_gap_s * 1e6;
  if (p.graph_kernel_gap_s) j["graph_kernel_gap_us"] = *p.graph_kernel_gap_s * 1e6;
  if (p.host_launch_s) j["host_launch_us"] = *p.host_launch_s * 1e6;
  if (p.host_per_kernel_s) j["host_per_kernel_us"] = *p.host_per_kernel_s * 1e6;
  if (!p.gemm.empty()) {
    Json g = Json::array();
    for (const auto& e : p.gemm)
      g.push_back({{"dtype", name_of(e.dtype)},
                   {"m", e.shape.m},
                   {"n", e.shape.n},
                   {"k", e.shape.k},
                   {"batch", e.shape.batch},
                   {"tflops", e.flops_per_s / 1e12}});
    j["gemm"] = std::move(g);
  }
  if (!p.attention.empty()) {
    Json a = Json::array();
    for (const auto& e : p.attention)
      a.push_back({{"dtype", name_of(e.dtype)},
                   {"batch", e.shape.batch},
                   {"seq_q", e.shape.seq_q},
                   {"seq_kv", e.shape.seq_kv},
                   {"heads", e.shape.heads},
                   {"kv_heads", e.shape.kv_heads},
                   {"head_dim", e.shape.head_dim},
                   {"causal", e.shape.causal},
                   {"direction", e.shape.backward ? "backward" : "forward"},
                   {"tflops", e.flops_per_s / 1e12}});
    j["attention"] = std::move(a);
  }
  if (p.model) j["model"] = *p.model;
  if (!p.links.empty()) j["links"] = to_json(p.links);
  return j;
}

}  // namespace meshsim
