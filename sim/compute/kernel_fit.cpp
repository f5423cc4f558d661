#include "compute/kernel_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "compute/kernel_time.hpp"
#include "compute/nelder_mead.hpp"
#include "core/median.hpp"

namespace meshsim {
namespace {

using Vec = std::vector<double>;

// Parameters are searched in log space (they are positive and span decades); fractions are
// capped at 1.
double fraction_of(double x) {
  return std::min(1.0, std::exp(x));
}

struct GemmRow {
  const MeasuredKernel* row;
  GemmTileUse use;
};

// Mean |log(predicted / measured)| of `rows`; `price` gives that ratio for one row.
template <class Rows, class Price>
double mean_abs_log(const Rows& rows, Price price) {
  double s = 0;
  for (const auto& r : rows) s += std::abs(std::log(price(r)));
  return s / static_cast<double>(std::max<std::size_t>(rows.size(), 1));
}

// Fits one fraction of `p` with the others held: `field` picks it, `error` scores a trial.
template <class Field, class Score>
double fit_fraction(KernelParams& p, Field field, Score error) {
  const auto m = nelder_mead(
      [&](const Vec& x) {
        KernelParams q = p;
        field(q) = fraction_of(x[0]);
        return error(q);
      },
      {std::log(field(p))}, {0.2});
  field(p) = fraction_of(m.x[0]);
  return field(p);
}

// `errors` are |log(predicted / measured)|: e^median − 1 is the median error factor (an
// over-prediction's relative error; an under-prediction's is slightly smaller).
std::string error_note(const Vec& errors) {
  return fmt::format("median error factor {:.1f} %", 100.0 * std::expm1(median_of(errors)));
}

}  // namespace

std::vector<double> log_errors(const std::vector<MeasuredKernel>& rows, const GpuSpec& spec,
                               const KernelParams& params) {
  const KernelGpu gpu(spec);
  std::vector<double> out;
  out.reserve(rows.size());
  for (const auto& r : rows)
    out.push_back(std::abs(std::log(kernel_seconds(r.kernel, gpu, params) / r.seconds)));
  return out;
}

KernelFit fit_kernel_params(const std::vector<MeasuredKernel>& rows, const GpuSpec& spec,
                            const KernelParams& base) {
  const KernelGpu gpu(spec);
  KernelFit fit;
  KernelParams& p = fit.params;
  p = base;

  // GEMMs: occupancy per menu tile does not depend on the parameters; compute it once.
  std::vector<GemmRow> g16, g8;
  for (const auto& r : rows)
    if (r.kernel.kind == KernelKind::gemm)
      (r.kernel.dtype == DType::fp8 ? g8 : g16)
          .push_back({&r, gemm_tile_use(r.kernel.gemm, gpu.sm_count)});
  const auto gemm_ratio = [&](const GemmParams& g) {
    return [&gpu, g](const GemmRow& r) {
      return gemm_seconds(r.row->kernel, gemm_occupancy(r.use, g.intensity_half), gpu, g) /
             r.row->seconds;
    };
  };
  Json gemm = Json::object();
  if (g16.size() >= 16) {
    auto set = [&](const Vec& x) {
      GemmParams g = p.gemm;
      g.fraction_16bit = fraction_of(x[0]);
      g.k_half = std::exp(x[1]);
      g.intensity_half = std::exp(x[2]);
      g.memory_fraction = fraction_of(x[3]);
      g.fixed_s = std::exp(x[4]);
      g.sharpness = std::clamp(1.0 + std::exp(x[5]), 1.0, 64.0);
      return g;
    };
    const auto& g0 = p.gemm;
    const auto m = nelder_mead(
        [&](const Vec& x) { return mean_abs_log(g16, gemm_ratio(set(x))); },
        {std::log(g0.fraction_16bit), std::log(g0.k_half), std::log(g0.intensity_half),
         std::log(g0.memory_fraction), std::log(g0.fixed_s), std::log(g0.sharpness - 1.0)},
        {0.2, 0.7, 0.7, 0.2, 0.5, 0.5});
    p.gemm = set(m.x);
    gemm = to_json(p.gemm);
    gemm.erase("fraction_fp8");
  } else if (!g16.empty()) {
    gemm["fraction_16bit"] = fit_fraction(
        p, [](KernelParams& q) -> double& { return q.gemm.fraction_16bit; },
        [&](const KernelParams& q) { return mean_abs_log(g16, gemm_ratio(q.gemm)); });
  }
  if (!g8.empty())
    gemm["fraction_fp8"] = fit_fraction(
        p, [](KernelParams& q) -> double& { return q.gemm.fraction_fp8; },
        [&](const KernelParams& q) { return mean_abs_log(g8, gemm_ratio(q.gemm)); });
  if (!gemm.empty()) {
    fit.model["gemm"] = gemm;
    std::vector<MeasuredKernel> all;
    for (const auto* v : {&g16, &g8})
      for (const auto& r : *v) all.push_back(*r.row);
    fit.lines.push_back(fmt::format(
        "gemm: {} kernels ({} 16-bit, {} fp8): fraction {:.3f} (fp8 {:.3f}), k_half {:.0f}, "
        "intensity_half {:.1f}, memory {:.3f} of HBM, sharpness {:.2f}, {:.2f} µs fixed; {}",
        all.size(), g16.size(), g8.size(), p.gemm.fraction_16bit, p.gemm.fraction_fp8,
        p.gemm.k_half, p.gemm.intensity_half, p.gemm.memory_fraction, p.gemm.sharpness,
        p.gemm.fixed_s * 1e6, error_note(log_errors(all, spec, p))));
  }

  // Memory-bound kernels, class by class.
  Json memory = Json::object();
  for (const auto c : kAllMemoryClasses) {
    std::vector<MeasuredKernel> cls;
    for (const auto& r : rows)
      if (r.kernel.kind == KernelKind::memory_bound && r.kernel.memory_class == c) cls.push_back(r);
    if (cls.size() < 3) continue;
    // The L2 speed-up only where some of the class's traffic can be in L2 (a GPU whose L2 size
    // is known, a class with a resident share); elsewhere it keeps the base's value.
    const bool l2 = gpu.l2_bytes > 0 && l2_resident_share(c) > 0;
    const auto set = [&](const Vec& x) {
      KernelParams q = p;
      q.of(c) = {fraction_of(x[0]), std::exp(x[1]), std::exp(x[2]),
                 l2 ? std::min(1.0 + std::exp(x[3]), 100.0) : p.of(c).l2_speedup};
      return q;
    };
    const auto& c0 = p.of(c);
    Vec start{std::log(c0.bandwidth_fraction), std::log(c0.fixed_s), std::log(c0.floor_s)};
    Vec step{0.3, 0.5, 0.5};
    if (l2) {
      start.push_back(std::log(std::max(c0.l2_speedup - 1.0, 0.5)));
      step.push_back(0.5);
    }
    const auto m = nelder_mead(
        [&](const Vec& x) {
          const KernelParams q = set(x);
          return mean_abs_log(cls, [&](const MeasuredKernel& r) {
            return kernel_seconds(r.kernel, gpu, q) / r.seconds;
          });
        },
        start, step);
    p = set(m.x);
    memory[std::string(name_of(c))] = to_json(p.of(c));
    fit.lines.push_back(fmt::format(
        "{}: {} kernels: {:.3f} of HBM, {:.2f} µs fixed, {:.2f} µs floor, {:.2f}× from L2; {}",
        name_of(c), cls.size(), p.of(c).bandwidth_fraction, p.of(c).fixed_s * 1e6,
        p.of(c).floor_s * 1e6, p.of(c).l2_speedup, error_note(log_errors(cls, spec, p))));
  }
  if (!memory.empty()) fit.model["memory"] = memory;

  // Attention: prefill forward, backward, decode.
  std::vector<MeasuredKernel> prefill, backward, decode;
  for (const auto& r : rows) {
    if (r.kernel.kind != KernelKind::attention) continue;
    const auto& s = r.kernel.attention;
    (s.backward ? backward : is_decode(s) ? decode : prefill).push_back(r);
  }
  const auto attention_error = [&](const std::vector<MeasuredKernel>& set_rows,
                                   const KernelParams& q) {
    return mean_abs_log(set_rows, [&](const MeasuredKernel& r) {
      return kernel_seconds(r.kernel, gpu, q) / r.seconds;
    });
  };
  Json attention = Json::object();
  if (prefill.size() >= 8) {
    const auto set = [&](const Vec& x) {
      KernelParams q = p;
      q.attention.fraction = fraction_of(x[0]);
      q.attention.kv_half = std::exp(x[1]);
      q.attention.fixed_s = std::exp(x[2]);
      q.attention.tile_s = std::exp(x[3]);
      q.attention.split_min_keys = std::max(128.0, std::exp(x[4]));
      return q;
    };
    const auto m = nelder_mead([&](const Vec& x) { return attention_error(prefill, set(x)); },
                               {std::log(p.attention.fraction), std::log(p.attention.kv_half),
                                std::log(p.attention.fixed_s), std::log(p.attention.tile_s),
                                std::log(p.attention.split_min_keys)},
                               {0.2, 0.7, 0.5, 0.7, 0.7});
    p = set(m.x);
    attention = to_json(p.attention);
    attention.erase("backward_ratio");
  } else if (!prefill.empty()) {
    attention["fraction"] = fit_fraction(
        p, [](KernelParams& q) -> double& { return q.attention.fraction; },
        [&](const KernelParams& q) { return attention_error(prefill, q); });
  }
  if (!backward.empty())
    attention["backward_ratio"] = fit_fraction(
        p, [](KernelParams& q) -> double& { return q.attention.backward_ratio; },
        [&](const KernelParams& q) { return attention_error(backward, q); });
  if (!attention.empty()) {
    fit.model["attention"] = attention;
    std::vector<MeasuredKernel> both = prefill;
    both.insert(both.end(), backward.begin(), backward.end());
    fit.lines.push_back(fmt::format(
        "attention: {} prefill and {} backward kernels: fraction {:.3f}, kv_half {:.0f}, "
        "{:.3f} µs per tile, split above {:.0f} keys, {:.2f} µs fixed, backward ratio {:.3f}; {}",
        prefill.size(), backward.size(), p.attention.fraction, p.attention.kv_half,
        p.attention.tile_s * 1e6, p.attention.split_min_keys, p.attention.fixed_s * 1e6,
        p.attention.backward_ratio, error_note(log_errors(both, spec, p))));
  }
  if (decode.size() >= 3) {
    const auto set = [&](const Vec& x) {
      KernelParams q = p;
      q.decode = {fraction_of(x[0]), std::exp(x[1]), std::exp(x[2])};
      return q;
    };
    const auto m = nelder_mead([&](const Vec& x) { return attention_error(decode, set(x)); },
                               {std::log(p.decode.bandwidth_fraction), std::log(p.decode.fixed_s),
                                std::log(p.decode.per_sequence_s)},
                               {0.2, 0.5, 0.7});
    p = set(m.x);
    fit.model["decode"] = to_json(p.decode);
    fit.lines.push_back(fmt::format(
        "decode attention: {} kernels: {:.3f} of HBM, {:.2f} µs fixed, {:.3f} µs per sequence; {}",
        decode.size(), p.decode.bandwidth_fraction, p.decode.fixed_s * 1e6,
        p.decode.per_sequence_s * 1e6, error_note(log_errors(decode, spec, p))));
  }
  return fit;
}

}  // namespace meshsim
