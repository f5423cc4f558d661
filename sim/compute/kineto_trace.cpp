#include "compute/kineto_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "core/median.hpp"
#include "core/physical_limits.hpp"

namespace meshsim {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains_any(const std::string& s, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (s.find(k) != std::string::npos) return true;
  return false;
}

std::optional<DType> dtype_of_torch(const std::string& t) {
  if (t == "c10::BFloat16") return DType::bf16;
  if (t == "c10::Half") return DType::fp16;
  if (t == "float") return DType::fp32;
  if (t.find("Float8") != std::string::npos) return DType::fp8;
  return std::nullopt;
}

// CUDA runtime/driver calls that launch work, and those that block the host until the GPU
// catches up (a pair of launches with one between them measures the GPU, not the host).
bool launch_call(const std::string& name) {
  return name.rfind("cudaLaunch", 0) == 0 || name.rfind("cuLaunch", 0) == 0 ||
         name == "cudaGraphLaunch";
}
bool sync_call(const std::string& name) {
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0;
  return name.find("Synchronize") != std::string::npos ||
         (copy && name.find("Async") == std::string::npos);  // an async copy does not block
}

struct HostCall {
  double ts_us, dur_us;
  bool launch;
};

// KinetoSummary::host_per_kernel_s from each thread's runtime calls.
void measure_host(std::map<std::pair<std::int64_t, std::int64_t>, std::vector<HostCall>>& threads,
                  KinetoSummary& out) {
  std::vector<HostCall>* busiest = nullptr;
  std::size_t most = 0;
  for (auto& [id, calls] : threads) {
    std::size_t n = 0;
    for (const auto& c : calls) n += c.launch ? 1 : 0;
    if (n > most) {
      most = n;
      busiest = &calls;
    }
  }
  if (!busiest) return;
  auto& calls = *busiest;
  std::stable_sort(calls.begin(), calls.end(),
                   [](const HostCall& a, const HostCall& b) { return a.ts_us < b.ts_us; });
  std::vector<double> call_us;
  for (const auto& c : calls)
    if (c.launch) call_us.push_back(c.dur_us);
  const double typical = median_of(call_us);
  std::vector<double> gaps;
  const HostCall* last = nullptr;
  bool synced = false;
  for (const auto& c : calls) {
    if (!c.launch) {
      synced = true;
      continue;
    }
    if (last && !synced)
      gaps.push_back(std::max(0.0, c.ts_us - last->ts_us - std::max(0.0, last->dur_us - typical)));
    last = &c;
    synced = false;
  }
  out.launch_call_s = typical * 1e-6;
  out.launch_gaps = gaps.size();
  if (gaps.size() >= 16) out.host_per_kernel_s = median_of(gaps) * 1e-6;
}

}  // namespace

std::string nccl_kernel_op(const std::string& kernel_name) {
  const auto s = lower(kernel_name);
  if (s.find("nccl") == std::string::npos) return "";
  if (s.find("allreduce") != std::string::npos) return "all_reduce";
  if (s.find("allgather") != std::string::npos) return "all_gather";
  if (s.find("reducescatter") != std::string::npos) return "reduce_scatter";
  if (s.find("alltoall") != std::string::npos) return "all_to_all";
  if (s.find("broadcast") != std::string::npos) return "broadcast";
  if (s.find("sendrecv") != std::string::npos || s.find("send") != std::string::npos ||
      s.find("recv") != std::string::npos)
    return "send_recv";
  if (s.find("reduce") != std::string::npos) return "reduce";
  return "nccl_other";
}

KinetoSummary read_kineto_trace(const std::string& path, int device) {
  return read_kineto_json(load_json_file(path), path, device);
}

KinetoSummary read_kineto_json(const Json& doc, const std::string& path, int device) {
  const auto root = JsonRef::root(doc, path);
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    root.fail("no traceEvents array (is this a Chrome trace from the PyTorch profiler?)");
  KinetoSummary out;
  out.file = path;
  out.device = device;
  std::vector<double> step_durs;
  // External id → (name, shapes, dtype) of GEMM CPU ops; → kernel time.
  struct CpuGemm {
    std::string name;
    Json dims;
    std::string type;
    std::string where;  // the event's JSON path, for range errors
  };
  std::map<std::int64_t, CpuGemm> cpu_gemms;
  std::map<std::int64_t, double> kernel_time_by_ext;
  double gemm = 0, attention = 0, other = 0;
  std::map<std::string, double> comm;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<HostCall>> host_calls;  // by pid, tid
  const auto events = root.child("traceEvents").array();
  for (const auto& ev : events) {
    const auto& e = ev.raw();
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
    const auto name = e["name"].get<std::string>();
    const auto cat = e.contains("cat") && e["cat"].is_string() ? lower(e["cat"].get<std::string>())
                                                               : std::string();
    const double dur_us = e.contains("dur") && e["dur"].is_number() ? e["dur"].get<double>() : 0;
    if (!(dur_us >= 0) || dur_us > 1e12) ev.fail("dur must be a non-negative number of µs");
    const Json empty = Json::object();
    const Json& args = e.contains("args") && e["args"].is_object() ? e["args"] : empty;
    if (name.rfind("ProfilerStep#", 0) == 0 && cat != "gpu_user_annotation") {
      step_durs.push_back(dur_us * 1e-6);
      continue;
    }
    if (cat == "cpu_op" && (name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm") &&
        args.contains("External id") && args["External id"].is_number_integer() &&
        args.contains("Input Dims")) {
      CpuGemm g{name, args["Input Dims"], "", ev.path()};
      if (args.contains("Input type") && args["Input type"].is_array() &&
          !args["Input type"].empty()) {
        for (const auto& t : args["Input type"])
          if (t.is_string() && !t.get<std::string>().empty()) {
            g.type = t.get<std::string>();
            break;
          }
      }
      cpu_gemms[args["External id"].get<std::int64_t>()] = g;
      continue;
    }
    if (cat == "cuda_runtime" || cat == "cuda_driver") {
      const bool launch = launch_call(name);
      if (!launch && !sync_call(name)) continue;
      const auto id = [&](const char* key) -> std::int64_t {
        return e.contains(key) && e[key].is_number_integer() ? e[key].get<std::int64_t>() : 0;
      };
      if (!e.contains("ts") || !e["ts"].is_number())
        ev.fail("a CUDA runtime event needs ts, a number of µs");
      const double ts = e["ts"].get<double>();
      if (!std::isfinite(ts) || std::abs(ts) > 1e15) ev.fail("ts must be a finite number of µs");
      host_calls[{id("pid"), id("tid")}].push_back({ts, dur_us, launch});
      continue;
    }
    if (cat != "kernel") continue;
    if (args.contains("device") && args["device"].is_number_integer() &&
        args["device"].get<int>() != device)
      continue;
    ++out.kernels;
    const double s = dur_us * 1e-6;
    if (args.contains("External id") && args["External id"].is_number_integer())
      kernel_time_by_ext[args["External id"].get<std::int64_t>()] += s;
    const auto op = nccl_kernel_op(name);
    const auto n = lower(name);
    if (!op.empty())
      comm[op] += s;
    else if (contains_any(n, {"flash", "fmha", "attention", "sdpa"}))
      attention += s;
    else if (contains_any(n, {"gemm", "cutlass", "xmma", "nvjet", "cublas"}))
      gemm += s;
    else
      other += s;
  }
  if (out.kernels == 0)
    root.fail("no GPU kernel events for device " + std::to_string(device) +
              " (profile with ProfilerActivity.CUDA)");
  measure_host(host_calls, out);
  out.steps = step_durs.empty() ? 1 : static_cast<int>(step_durs.size());
  if (!step_durs.empty()) {
    double sum = 0;
    for (double v : step_durs) sum += v;
    out.step_s = sum / static_cast<double>(step_durs.size());
  }
  const double k = 1.0 / out.steps;
  out.gemm_s = gemm * k;
  out.attention_s = attention * k;
  out.other_compute_s = other * k;
  for (auto& [op, s] : comm) out.comm_s[op] = s * k;
  // GEMM shapes: mm [[M,K],[K,N]]; addmm [bias, [M,K], [K,N]]; bmm [[B,M,K],[B,K,N]].
  std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
           std::vector<double>>
      rates;
  for (const auto& [ext, g] : cpu_gemms) {
    const auto kt = kernel_time_by_ext.find(ext);
    if (kt == kernel_time_by_ext.end() || !(kt->second > 0)) continue;
    const auto dt = dtype_of_torch(g.type);
    if (!dt || !g.dims.is_array()) continue;
    const auto& d = g.dims;
    const std::size_t first = g.name == "aten::addmm" ? 1 : 0;
    if (d.size() < first + 2 || !d[first].is_array() || !d[first + 1].is_array()) continue;
    const auto& a = d[first];
    const auto& b = d[first + 1];
    // A dimension as the profiler writes it, an integer; anything else (a string, a float such
    // as 2.2e78, whose conversion to an integer is undefined: found by fuzz_kineto) is -1, and
    // the op is not a GEMM point.
    const auto dim = [](const Json& v) -> std::int64_t {
      if (v.is_number_unsigned())
        return v.get<std::uint64_t>() > (std::uint64_t{1} << 62)
                   ? std::int64_t{1} << 62
                   : static_cast<std::int64_t>(v.get<std::uint64_t>());
      return v.is_number_integer() ? v.get<std::int64_t>() : -1;
    };
    std::int64_t batch = 1, m = 0, kk = 0, n = 0;
    if (g.name == "aten::bmm" && a.size() == 3 && b.size() == 3) {
      batch = dim(a[0]);
      m = dim(a[1]);
      kk = dim(a[2]);
      n = dim(b[2]);
    } else if (a.size() == 2 && b.size() == 2) {
      m = dim(a[0]);
      kk = dim(a[1]);
      n = dim(b[1]);
    }
    if (m <= 0 || n <= 0 || kk <= 0 || batch <= 0) continue;
    // Range checks before a point enters a profile (issue 19: 2^62-sized shapes were written).
    // 2^24 per dimension is the model loader's bound on any model dimension.
    constexpr std::int64_t kMaxGemmDim = std::int64_t{1} << 24;
    if (m > kMaxGemmDim || n > kMaxGemmDim || kk > kMaxGemmDim || batch > kMaxGemmDim)
      throw Error(
          path, g.where + "/args/Input Dims",
          fmt::format("GEMM {}×{}×{} (batch {}) has a dimension past 2^24", m, n, kk, batch));
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                         static_cast<double>(kk) * static_cast<double>(batch);
    if (flops / kt->second > kMaxPeak_TFLOPS * 1e12)
      throw Error(
          path, g.where,
          fmt::format("GEMM {}×{}×{} in {:g} µs of kernels is {:.3g} TFLOP/s, more than "
                      "any GPU ({:g})",
                      m, n, kk, kt->second * 1e6, flops / kt->second / 1e12, kMaxPeak_TFLOPS));
    rates[{static_cast<int>(*dt), m, n, kk, batch}].push_back(flops / kt->second);
  }
  for (const auto& [key, v] : rates) {
    GemmPoint p;
    p.dtype = static_cast<DType>(std::get<0>(key));
    p.shape = GemmShape{std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)};
    p.flops_per_s = median_of(v);
    out.gemm_points.push_back(p);
  }
  return out;
}

}  // namespace meshsim
