#include "strategy/pipeline_schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace meshsim {
namespace {

// `merge`: one more warm-up forward (so a stage's merged pair never waits for a forward that
// its neighbour holds back in a pair of its own), and each steady-state forward merged with the
// backward after it.
void one_f_one_b(std::vector<PipelineAction>& out, std::int64_t pp, std::int64_t stage,
                 std::int64_t m, bool split_weight, bool merge = false) {
  const std::int64_t warmup = std::min(pp - stage - (merge ? 0 : 1), m);
  auto backward = [&](std::int64_t mb) {
    out.push_back({PassKind::backward, mb, 0});
    if (split_weight) out.push_back({PassKind::weight, mb, 0});
  };
  for (std::int64_t i = 0; i < warmup; ++i) out.push_back({PassKind::forward, i, 0});
  for (std::int64_t i = 0; i < m - warmup; ++i) {
    out.push_back({PassKind::forward, warmup + i, 0, merge});
    backward(i);
  }
  for (std::int64_t i = m - warmup; i < m; ++i) backward(i);
}

}  // namespace

std::optional<std::string> interleaving_error(const Schedule& schedule, std::int64_t pp,
                                              std::int64_t m) {
  if (schedule.kind != ScheduleKind::interleaved || schedule.virtual_stages == 1) return {};
  const auto s = [](std::int64_t x) { return std::to_string(x); };
  if (schedule.group == 0)
    return m % pp == 0 ? std::nullopt
                       : std::optional<std::string>(
                             "interleaved 1F1B needs the micro-batches per step (" + s(m) +
                             ") to be a multiple of pp = " + s(pp) + " (as Megatron-LM requires)");
  const std::int64_t g = schedule.group;
  if (g < pp)
    return "the micro-batch group (" + s(g) + ") must be at least pp = " + s(pp) +
           " (as Megatron-LM requires)";
  if (g > m)
    return "the micro-batch group (" + s(g) + ") exceeds the micro-batches per step (" + s(m) + ")";
  if (m % g != 0 && m % g < pp)
    return "groups of " + s(g) + " leave a last group of " + s(m % g) + " of the " + s(m) +
           " micro-batches per step, fewer than pp = " + s(pp) + " (as Megatron-LM refuses)";
  return {};
}

std::optional<std::int64_t> smallest_microbatch_group(std::int64_t pp, std::int64_t m) {
  // G = m always passes (one group), so the loop ends by m.
  for (std::int64_t g = pp; g <= m; ++g)
    if (m % g == 0 || m % g >= pp) return g;
  return std::nullopt;
}

std::vector<PipelineAction> stage_actions(const Schedule& schedule, std::int64_t pp,
                                          std::int64_t stage, std::int64_t m) {
  std::vector<PipelineAction> out;
  switch (schedule.kind) {
    case ScheduleKind::gpipe:
      for (std::int64_t i = 0; i < m; ++i) out.push_back({PassKind::forward, i, 0});
      for (std::int64_t i = 0; i < m; ++i) out.push_back({PassKind::backward, i, 0});
      break;
    case ScheduleKind::one_f_one_b:
      one_f_one_b(out, pp, stage, m, false);
      break;
    case ScheduleKind::zero_bubble:
      one_f_one_b(out, pp, stage, m, true);
      break;
    case ScheduleKind::one_f_one_b_overlap:
      one_f_one_b(out, pp, stage, m, false, true);
      break;
    case ScheduleKind::interleaved: {
      const std::int64_t v = schedule.virtual_stages;
      if (v == 1) {
        one_f_one_b(out, pp, stage, m, false);
        break;
      }
      if (auto why = interleaving_error(schedule, pp, m)) throw Error("", "--schedule", *why);
      // Megatron-LM's get_schedule_table: groups of G consecutive micro-batches (the last one
      // the rest), each group running chunk 0 for all its micro-batches, then chunk 1, ...;
      // backward visits the chunks in reverse. With G = pp: virtual micro-batch k runs chunk
      // (k / pp) mod v of micro-batch (k / (pp·v))·pp + k mod pp.
      const std::int64_t G = schedule.group > 0 ? schedule.group : pp;
      std::vector<std::pair<std::int64_t, std::int64_t>> table;  // (micro-batch, chunk)
      for (std::int64_t first = 0; first < m; first += G) {
        const std::int64_t end = first + G >= m ? m : first + G;
        for (std::int64_t c = 0; c < v; ++c)
          for (std::int64_t mb = first; mb < end; ++mb) table.emplace_back(mb, c);
      }
      const std::int64_t total = m * v;
      auto f = [&](std::int64_t k) {
        const auto& [mb, c] = table[static_cast<std::size_t>(k)];
        return PipelineAction{PassKind::forward, mb, c};
      };
      auto b = [&](std::int64_t k) {
        const auto& [mb, c] = table[static_cast<std::size_t>(k)];
        return PipelineAction{PassKind::backward, mb, v - 1 - c};
      };
      // With `overlap` (Megatron-Core's combined 1F1B) each steady-state forward runs merged with
      // the backward after it; the warm-up stays Megatron's (assumption: no extra warm-up chunk,
      // since neighbouring stages' warm-ups already differ by two chunks, which is what keeps a
      // merged pair from waiting on its neighbour's).
      const std::int64_t warmup = std::min((pp - stage - 1) * 2 + (v - 1) * G, total);
      for (std::int64_t k = 0; k < warmup; ++k) out.push_back(f(k));
      for (std::int64_t i = 0; i < total - warmup; ++i) {
        auto fa = f(warmup + i);
        fa.merged = schedule.overlap;
        out.push_back(fa);
        out.push_back(b(i));
      }
      for (std::int64_t i = total - warmup; i < total; ++i) out.push_back(b(i));
      break;
    }
  }
  return out;
}

std::vector<PipelineAction> step_actions(const Schedule& schedule, std::int64_t pp,
                                         std::int64_t stage, std::int64_t microbatches,
                                         std::int64_t steps) {
  if (steps <= 1) return stage_actions(schedule, pp, stage, microbatches);
  const std::int64_t each = microbatches / steps;
  const auto one = stage_actions(schedule, pp, stage, each);
  std::vector<PipelineAction> out;
  out.reserve(one.size() * static_cast<std::size_t>(steps));
  for (std::int64_t k = 0; k < steps; ++k)
    for (auto a : one) {
      a.microbatch += k * each;
      out.push_back(a);
    }
  return out;
}

std::string to_string(const std::vector<PipelineAction>& actions) {
  std::string s;
  bool merged = false;  // the previous action runs merged with this one: "F1&B0"
  for (const auto& a : actions) {
    if (!s.empty()) s += merged ? '&' : ' ';
    merged = a.merged;
    s += a.pass == PassKind::forward ? 'F' : a.pass == PassKind::backward ? 'B' : 'W';
    s += std::to_string(a.microbatch);
    if (a.chunk > 0) s += "." + std::to_string(a.chunk);
  }
  return s;
}

std::optional<ScheduleTimes> play_schedule(const std::vector<std::vector<PipelineAction>>& actions,
                                           std::int64_t microbatches, const PassTimes& times) {
  const auto pp = static_cast<std::int64_t>(actions.size());
  const auto G = static_cast<std::int64_t>(times.forward.size());
  const auto M = microbatches;
  constexpr double kUnknown = -1;
  // When each micro-batch's forward and backward of each chunk ends (what the next stage waits
  // for).
  std::vector<double> fwd_end(static_cast<std::size_t>(G * M), kUnknown),
      bwd_end(fwd_end.size(), kUnknown);
  std::vector<std::size_t> next(actions.size(), 0);
  ScheduleTimes out{std::vector<double>(actions.size(), 0.0),
                    std::vector<double>(actions.size(), 0.0)};
  // Rounds over the stages, each going as far as what it receives allows.
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < actions.size(); ++r)
      for (; next[r] < actions[r].size(); ++next[r], progress = true) {
        const auto& a = actions[r][next[r]];
        const std::int64_t g = a.chunk * pp + static_cast<std::int64_t>(r);
        const auto at = [&](std::int64_t chunk) {
          return static_cast<std::size_t>(chunk * M + a.microbatch);
        };
        double ready = out.end_s[r], took = 0;
        // A merged pair starts once both passes' inputs are in (the trace emits it so).
        if (a.merged && next[r] + 1 < actions[r].size()) {
          const auto& b = actions[r][next[r] + 1];
          const std::int64_t gb = b.chunk * pp + static_cast<std::int64_t>(r);
          if (b.pass == PassKind::backward && gb < G - 1) {
            const double in = bwd_end[static_cast<std::size_t>((gb + 1) * M + b.microbatch)];
            if (in == kUnknown) break;
            ready = std::max(ready, in);
          }
        }
        if (a.pass == PassKind::forward) {
          if (g > 0) {
            if (fwd_end[at(g - 1)] == kUnknown) break;
            ready = std::max(ready, fwd_end[at(g - 1)]);
          }
          took = times.forward[static_cast<std::size_t>(g)];
        } else if (a.pass == PassKind::backward) {
          if (g < G - 1) {
            if (bwd_end[at(g + 1)] == kUnknown) break;
            ready = std::max(ready, bwd_end[at(g + 1)]);
          }
          took = times.backward[static_cast<std::size_t>(g)];
        } else {
          took = times.weight[static_cast<std::size_t>(g)];
        }
        out.last_start_s[r] = ready;
        out.end_s[r] = ready + took;
        if (a.pass == PassKind::forward) fwd_end[at(g)] = out.end_s[r];
        if (a.pass == PassKind::backward) bwd_end[at(g)] = out.end_s[r];
      }
  }
  for (std::size_t r = 0; r < actions.size(); ++r)
    if (next[r] < actions[r].size()) return std::nullopt;
  return out;
}

}  // namespace meshsim
