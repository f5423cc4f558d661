#include "parallel/parallel_config.hpp"

#include <fmt/ranges.h>

#include <charconv>

#include "core/enum_names.hpp"
#include "core/error.hpp"

namespace meshsim {

std::string to_string(const Schedule& s) {
  // The other schedules have no parameters: their family is their name.
  if (s.kind != ScheduleKind::interleaved) return std::string(schedule_family(s));
  return (s.overlap ? "interleaved-overlap:" : "interleaved:") + std::to_string(s.virtual_stages) +
         (s.group > 0 ? ":" + std::to_string(s.group) : std::string());
}

std::string_view schedule_family(const Schedule& s) {
  switch (s.kind) {
    case ScheduleKind::gpipe:
      return "gpipe";
    case ScheduleKind::one_f_one_b:
      return "1f1b";
    case ScheduleKind::interleaved:
      if (s.virtual_stages <= 1) return "1f1b";
      return s.overlap ? "interleaved-overlap" : "interleaved";
    case ScheduleKind::zero_bubble:
      return "zb";
    case ScheduleKind::one_f_one_b_overlap:
      return "1f1b-overlap";
  }
  return "?";
}

Schedule parse_schedule(std::string_view text, const std::string& where) {
  Schedule s;
  if (text == "gpipe")
    s.kind = ScheduleKind::gpipe;
  else if (text == "1f1b")
    s.kind = ScheduleKind::one_f_one_b;
  else if (text == "zb")
    s.kind = ScheduleKind::zero_bubble;
  else if (text == "1f1b-overlap")
    s.kind = ScheduleKind::one_f_one_b_overlap;
  else if (text.starts_with("interleaved:") || text.starts_with("interleaved-overlap:")) {
    s.kind = ScheduleKind::interleaved;
    s.overlap = text.starts_with("interleaved-overlap:");
    auto v = text.substr(text.find(':') + 1);
    std::string_view g;
    if (const auto colon = v.find(':'); colon != std::string_view::npos) {
      g = v.substr(colon + 1);
      v = v.substr(0, colon);
    }
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s.virtual_stages);
    if (ec != std::errc() || end != v.data() + v.size() || s.virtual_stages < 1 ||
        s.virtual_stages > 1024)
      throw Error("", where, "'" + std::string(text) + "': virtual stages must be 1..1024");
    if (text.find(':') != text.rfind(':')) {
      const auto [gend, gec] = std::from_chars(g.data(), g.data() + g.size(), s.group);
      if (gec != std::errc() || gend != g.data() + g.size() || s.group < 1 || s.group > 8192)
        throw Error("", where,
                    "'" + std::string(text) + "': the micro-batch group must be 1..8192");
    }
    if (s.overlap && s.virtual_stages < 2)
      throw Error("", where,
                  "'" + std::string(text) +
                      "': the overlapped interleaved schedule needs 2 or more virtual stages "
                      "(without PP, 1f1b-overlap)");
  } else {
    throw Error("", where,
                "'" + std::string(text) +
                    "': expected gpipe, 1f1b, interleaved:V, interleaved-overlap:V, zb or "
                    "1f1b-overlap");
  }
  return s;
}

std::vector<std::int64_t> split_layers(std::int64_t layers, std::int64_t chunks) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(chunks), layers / chunks);
  std::int64_t extra = layers % chunks;
  // Middle chunks first, outward: the ends carry the embedding and the logits.
  const std::int64_t mid = chunks / 2;
  for (std::int64_t step = 0; extra > 0; ++step) {
    const std::int64_t i = (step % 2 == 0) ? mid + step / 2 : mid - 1 - step / 2;
    if (i >= 0 && i < chunks) {
      ++out[static_cast<std::size_t>(i)];
      --extra;
    }
  }
  return out;
}

std::string recompute_label(const ParallelConfig& c) {
  std::string s(name_of(c.recompute));
  if (c.recompute == Recompute::full && c.recompute_block > 0)
    return s + " (block " + std::to_string(c.recompute_block) + ")";
  if (c.recompute == Recompute::full && c.recompute_group > 1)
    return s + " (uniform " + std::to_string(c.recompute_group) + ")";
  if (c.recompute == Recompute::full && c.recompute_every > 1)
    return s + " (every " + std::to_string(c.recompute_every) + ")";
  if (c.recompute != Recompute::selective || c.recompute_modules.empty()) return s;
  return fmt::format("{} ({})", s, fmt::join(c.recompute_modules, ", "));
}

void set_recompute_method(ParallelConfig& c, std::string_view method, std::int64_t layers,
                          const std::string& where) {
  if (c.recompute != Recompute::full || c.recompute_every != 1)
    throw Error("", where, "a recompute method needs full recompute of every layer");
  if (layers < 1 || layers > 65536)
    throw Error("", where, "--recompute-num-layers must be from 1 to 65536");
  c.recompute_block = 0;
  c.recompute_group = 1;
  if (method == "block")
    c.recompute_block = static_cast<std::int32_t>(layers);
  else if (method == "uniform")
    c.recompute_group = static_cast<std::int32_t>(layers);
  else
    throw Error("", where,
                "--recompute-method '" + std::string(method) + "': expected uniform or block");
}

}  // namespace meshsim
