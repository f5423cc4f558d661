#include "compute/kernel_params.hpp"

#include <functional>

#include "core/enum_names.hpp"

namespace meshsim {
namespace {

// One optional key: a fraction in (0, 1], a positive number, or a time in µs (≥ 0).
void fraction(ObjectReader& r, std::string_view key, double& out) {
  if (auto v = r.optional(key)) {
    const double x = v->positive_number();
    if (x > 1.0) v->fail("must be a fraction in (0, 1]");
    out = x;
  }
}
void positive(ObjectReader& r, std::string_view key, double& out) {
  if (auto v = r.optional(key)) out = v->positive_number();
}
void micros(ObjectReader& r, std::string_view key, double& out_s) {
  if (auto v = r.optional(key)) {
    const double us = v->non_negative_number();
    if (us > 1e6) v->fail("a per-kernel cost above one second is not a kernel");
    out_s = us * 1e-6;
  }
}

}  // namespace

KernelParams generic_kernel_params() {
  KernelParams p;
  // Memory classes start from STREAM triad (2.97 of 3.35 TB/s on H100, hardware.md C2). The
  // optimizer update streams parameters, gradients and moments that are not in L2, as triad
  // does; classes that a fit measures replace these.
  for (auto& c : p.memory) c = MemoryClassParams{2.97 / 3.35, 2e-6, 2e-6, 1};
  p.attention.fraction = 327.9 / 989.0;
  return p;
}

KernelParams read_kernel_params(const JsonRef& ref, KernelParams base) {
  ObjectReader r(ref);
  if (auto g = r.optional("gemm")) {
    ObjectReader gr(*g);
    auto& p = base.gemm;
    fraction(gr, "fraction_16bit", p.fraction_16bit);
    fraction(gr, "fraction_fp8", p.fraction_fp8);
    positive(gr, "k_half", p.k_half);
    positive(gr, "intensity_half", p.intensity_half);
    fraction(gr, "memory_fraction", p.memory_fraction);
    if (auto v = gr.optional("sharpness")) {
      p.sharpness = v->positive_number();
      if (p.sharpness < 1 || p.sharpness > 64) v->fail("must be between 1 and 64");
    }
    micros(gr, "fixed_us", p.fixed_s);
    gr.finish();
  }
  if (auto m = r.optional("memory")) {
    if (!m->raw().is_object()) m->fail("must be an object of kernel classes");
    for (const auto& [key, value] : m->raw().items()) {
      const auto c = parse_memory_class(key);
      const JsonRef entry = m->child(key);
      if (!c)
        entry.fail("unknown kernel class '" + key + "' (known: " + joined_names(kAllMemoryClasses) +
                   ")");
      ObjectReader cr(entry);
      auto& p = base.of(*c);
      fraction(cr, "bandwidth_fraction", p.bandwidth_fraction);
      micros(cr, "fixed_us", p.fixed_s);
      micros(cr, "floor_us", p.floor_s);
      if (auto v = cr.optional("l2_speedup")) {
        p.l2_speedup = v->positive_number();
        if (p.l2_speedup < 1 || p.l2_speedup > 100) v->fail("must be between 1 and 100");
      }
      cr.finish();
    }
  }
  if (auto a = r.optional("attention")) {
    ObjectReader ar(*a);
    auto& p = base.attention;
    fraction(ar, "fraction", p.fraction);
    positive(ar, "kv_half", p.kv_half);
    micros(ar, "tile_us", p.tile_s);
    if (auto v = ar.optional("split_min_keys")) {
      p.split_min_keys = v->positive_number();
      if (p.split_min_keys < 128) v->fail("must be at least one 128-key tile");
    }
    micros(ar, "fixed_us", p.fixed_s);
    fraction(ar, "backward_ratio", p.backward_ratio);
    ar.finish();
  }
  if (auto d = r.optional("decode")) {
    ObjectReader dr(*d);
    auto& p = base.decode;
    fraction(dr, "bandwidth_fraction", p.bandwidth_fraction);
    micros(dr, "fixed_us", p.fixed_s);
    micros(dr, "per_sequence_us", p.per_sequence_s);
    dr.finish();
  }
  r.finish();
  return base;
}

Json to_json(const GemmParams& p) {
  return {{"fraction_16bit", p.fraction_16bit},
          {"fraction_fp8", p.fraction_fp8},
          {"k_half", p.k_half},
          {"intensity_half", p.intensity_half},
          {"memory_fraction", p.memory_fraction},
          {"sharpness", p.sharpness},
          {"fixed_us", p.fixed_s * 1e6}};
}

Json to_json(const MemoryClassParams& p) {
  return {{"bandwidth_fraction", p.bandwidth_fraction},
          {"fixed_us", p.fixed_s * 1e6},
          {"floor_us", p.floor_s * 1e6},
          {"l2_speedup", p.l2_speedup}};
}

Json to_json(const AttentionParams& p) {
  return {{"fraction", p.fraction},      {"kv_half", p.kv_half},
          {"tile_us", p.tile_s * 1e6},   {"split_min_keys", p.split_min_keys},
          {"fixed_us", p.fixed_s * 1e6}, {"backward_ratio", p.backward_ratio}};
}

Json to_json(const DecodeParams& p) {
  return {{"bandwidth_fraction", p.bandwidth_fraction},
          {"fixed_us", p.fixed_s * 1e6},
          {"per_sequence_us", p.per_sequence_s * 1e6}};
}

Json to_json(const KernelParams& p) {
  Json memory = Json::object();
  for (const auto c : kAllMemoryClasses) memory[std::string(name_of(c))] = to_json(p.of(c));
  return {{"gemm", to_json(p.gemm)},
          {"memory", std::move(memory)},
          {"attention", to_json(p.attention)},
          {"decode", to_json(p.decode)}};
}

}  // namespace meshsim
