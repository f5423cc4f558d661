#include "report/search_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "compute/dtype.hpp"
#include "parallel/parallel_config.hpp"
#include "report/metrics_json.hpp"
#include "report/report_candidate.hpp"

namespace meshsim {
namespace {

// `host`: a column for the GPU's wait for the host's launches (when the profile models them).
std::string row(std::size_t rank, const EvaluatedCandidate& e, bool host) {
  const auto& r = e.result;
  auto ex = [&](const char* g) { return r.exposed_comm_s.at(g); };
  return fmt::format(
      "{:>4}  {:<54} {:>8.3f} {:>9.1f} {:>5.1f}% {:>8.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} "
      "{:>7.3f} {:>7.3f}{} {:>7.1f}",
      rank, e.candidate.label(), r.step_time_s, r.tokens_per_s_per_gpu, 100 * r.mfu, r.compute_s,
      ex("tp"), ex("dp"), ex("pp"), ex("cp"), ex("ep"), r.bubble_s,
      host ? fmt::format(" {:>7.3f}", r.host_wait_s) : std::string(), r.memory.total() / 1e9);
}

Json result_json(std::size_t rank, const EvaluatedCandidate& e) {
  const auto& r = e.result;
  const auto& c = e.candidate;
  Json j = {{"rank", rank},
            {"label", c.label()},
            {"mesh", mesh_json(c.config.mesh)},
            {"zero", c.config.zero},
            {"schedule", to_string(c.config.schedule)},
            {"mbs", c.micro_batch},
            {"recompute", name_of(c.config.recompute)},
            {"recompute_modules", c.config.recompute_modules},
            {"recompute_block", c.config.recompute_block},
            {"recompute_every", c.config.recompute_every},
            {"stack", e.result.stack.empty() ? c.stack : e.result.stack}};
  if (!e.error.empty()) {
    j["error"] = e.error;
    return j;
  }
  j.update(training_json(r));
  // The layers per pipeline chunk it ran, and where a search tuned them, the note naming the
  // switches (the launch configuration's flags).
  j["stage_layers"] = r.chunk_layers;
  if (!r.tuned_split_note.empty()) j["tuned_split"] = r.tuned_split_note;
  return j;
}

// "4.2% slower than the winner", or faster for a layout outside the searched space (a pinned
// dimension or a search limit left it out).
std::string versus_winner(double step_s, const EvaluatedCandidate& best) {
  const double pct = 100 * (step_s / best.result.step_time_s - 1);
  return fmt::format("{:.1f}% {} than the winner", std::abs(pct), pct < 0 ? "faster" : "slower");
}

}  // namespace

void write_search_csv(const std::vector<EvaluatedCandidate>& results, std::ostream& f) {
  f << "rank,tp,pp,cp,dp,ep,fsdp,zero,schedule,mbs,recompute,step_time_s,tokens_per_s_per_gpu,"
       "mfu,"
       "compute_s,exposed_tp_s,exposed_dp_s,exposed_pp_s,exposed_cp_s,exposed_ep_s,bubble_s,"
       "memory_bytes,error\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& e = results[i];
    const auto& m = e.candidate.config.mesh;
    const auto& x = e.result;
    auto ex = [&](const char* g) {
      const auto it = x.exposed_comm_s.find(g);
      return it == x.exposed_comm_s.end() ? 0.0 : it->second;
    };
    f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
                     i + 1, m.tp, m.pp, m.cp, m.dp, m.ep, m.fsdp > 0 ? m.fsdp : m.dp,
                     e.candidate.config.zero, to_string(e.candidate.config.schedule),
                     e.candidate.micro_batch, name_of(e.candidate.config.recompute), x.step_time_s,
                     x.tokens_per_s_per_gpu, x.mfu, x.compute_s, ex("tp"), ex("dp"), ex("pp"),
                     ex("cp"), ex("ep"), x.bubble_s, x.memory.total(), e.error);
  }
}

std::string moved_layers_text(std::int64_t layouts) {
  return fmt::format(
      "{} kept layouts fit memory only with layers moved off a stage by the stack's end switches "
      "(its own split does not fit)",
      layouts);
}

Json search_json(const SearchRun& run) {
  const auto& r = *run.result;
  const auto& en = r.enumeration;
  Json j;
  j["candidates"] = en.total;
  j["stack"] = run.stack;
  j["notes"] = run.notes;
  Json rej = Json::object();
  for (const auto& [k, v] : en.rejected) rej[k] = v;
  j["rejected"] = rej;
  j["moved_layers"] = en.moved_layers;
  j["evaluated"] = r.results.size() - run.skipped;
  if (run.skipped > 0) {
    j["not_simulated"] = run.skipped;
    j["stopped"] = run.stopped;
  }
  Json results = Json::array();
  for (std::size_t i = 0; i < r.results.size(); ++i)
    results.push_back(result_json(i + 1, r.results[i]));
  j["results"] = std::move(results);
  j["heuristic"] = {
      {"label", run.heuristic_label}, {"rule", run.heuristic_rule}, {"rank", run.heuristic_rank}};
  // Outside the top K and too far behind it to rank exactly: null, and how far behind.
  if (run.heuristic_rank > 0 && !run.heuristic_rank_exact) {
    j["heuristic"]["rank"] = nullptr;
    j["heuristic"]["step_s"] = r.results[run.heuristic_rank - 1].result.step_time_s;
  }
  // TP degrees whose best is beyond reach of the K-th best: what it is at least.
  if (!r.tp_best_at_least.empty()) {
    Json far = Json::object();
    for (const auto& [tp, s] : r.tp_best_at_least) far[std::to_string(tp)] = s;
    j["tp_best_at_least_s"] = std::move(far);
  }
  if (!run.launch.empty()) j["launch"] = {{"format", run.launch_format}, {"text", run.launch}};
  return j;
}

std::string search_text(const SearchRun& run) {
  const auto& r = *run.result;
  const auto& en = r.enumeration;
  std::string out;
  out += fmt::format("# meshsim search: {} on {} ({} × {}), seq {}, global batch {}, {}\n",
                     run.model, run.cluster, run.gpus, run.gpu, run.job.seq, run.job.global_batch,
                     name_of(run.job.dtype));
  out += "# kernel model: " + run.kernel_model + "\n";
  // A stack's CP exchange sets its CP layouts' attention time: named when a shown layout has CP.
  std::map<std::string, std::string, std::less<>> cp_comm;
  for (std::size_t i = 0; i < std::min(run.top, r.results.size()); ++i) {
    const auto& e = r.results[i];
    if (e.error.empty() && !e.result.cp_comm.empty())
      cp_comm.emplace(e.result.stack.empty() ? e.candidate.stack : e.result.stack,
                      e.result.cp_comm);
  }
  const auto named = [&](const std::string& st) {
    const auto it = cp_comm.find(st);
    return it == cp_comm.end() ? st : st + " (CP K/V " + it->second + ")";
  };
  std::vector<std::string> stacks;
  for (const auto& st : run.stacks_compared) stacks.push_back(named(st));
  out += stacks.empty() ? "# stack: " + named(run.stack) + "\n"
                        : fmt::format("# stacks compared: {}\n", fmt::join(stacks, ", "));
  if (!run.recompute_modules.empty())
    out +=
        fmt::format("# selective recompute: modules {}\n", fmt::join(run.recompute_modules, ", "));
  for (const auto& n : run.notes) out += "# note: " + n + "\n";
  std::string rejected;
  for (const auto& [k, v] : en.rejected) rejected += fmt::format("; {} {}", v, k);
  out += fmt::format("# {} combinations{}; {} simulated\n", en.total, rejected,
                     r.results.size() - run.skipped);
  if (en.moved_layers > 0) out += "# " + moved_layers_text(en.moved_layers) + "\n";
  if (run.skipped > 0) out += "# stopped early (" + run.stopped + ")\n";
  if (r.results.empty() || !r.results.front().error.empty()) {
    if (run.skipped > 0 && run.skipped == r.results.size())
      out += "no layout was simulated before the search stopped\n";
    else
      out +=
          "no candidate fits this cluster; try --allow-tp-across-nodes, more nodes or a smaller "
          "batch\n";
    return out;
  }
  out += fmt::format(
      "{:>4}  {:<54} {:>8} {:>9} {:>6} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}{} {:>7}\n", "rank",
      "candidate", "step s", "tok/s/GPU", "MFU", "compute", "exp tp", "exp dp", "exp pp", "exp cp",
      "exp ep", "bubble", run.host_column ? fmt::format(" {:>7}", "host") : std::string(),
      "mem GB");
  const std::size_t top = std::min(std::max<std::size_t>(run.top, 1), r.results.size());
  for (std::size_t i = 0; i < top; ++i)
    if (r.results[i].error.empty()) out += row(i + 1, r.results[i], run.host_column) + "\n";
  const auto& best = r.results.front();
  const auto ranked = report_candidates(r.results);
  // Explain against the best layout that is not equivalent to #1 (report_candidate.hpp): a tie
  // or another data-parallel sharding of the same shape says nothing about why #1 wins.
  const auto groups = group_equivalent(ranked);
  if (groups.front().members.size() > 1)
    out += fmt::format(
        "#1 is one of {} equivalent shapes (the same step time, or another ZeRO stage or HSDP "
        "group within {:.1f} % of it)\n",
        groups.front().members.size(), 100 * kEquivalentStep);
  if (groups.size() > 1) {
    const auto next = groups[1].members.front();
    out += "why #1 wins: " + why_winner(ranked.front(), ranked[next], next + 1) + "\n";
  }
  if (!best.result.tuned_split_note.empty())
    out += "#1's pipeline split: " + best.result.tuned_split_note + "\n";
  // Best per TP degree: where TP stops paying for its per-layer collectives.
  if (best_per_tp(ranked, r.tp_best_at_least).size() > 1) {
    out += "best per TP degree: " + best_per_tp_line(ranked, r.tp_best_at_least) + "\n";
    if (run.pcie && best.candidate.config.mesh.tp <= 2)
      out += fmt::format(
          "TP is kept at {}: GPUs of a node talk over PCIe (path class {}), and every layer's TP "
          "all-reduce crosses it, so larger TP adds exposed communication faster than it removes "
          "compute\n",
          best.candidate.config.mesh.tp, name_of(*run.pcie));
  }
  const auto& h = run.heuristic_label;
  const auto& why = run.heuristic_rule;
  if (run.heuristic_rank > 0 && !run.heuristic_rank_exact)
    out += fmt::format(
        "seed heuristic ({}): {} → outside the top {}, {} (not every faster layout was "
        "simulated; --exhaustive ranks it)\n",
        why, h, run.top_k,
        versus_winner(r.results[run.heuristic_rank - 1].result.step_time_s, best));
  else if (run.heuristic_rank > 0)
    out += fmt::format(
        "seed heuristic ({}): {} → rank {} of {}{}\n", why, h, run.heuristic_rank, r.results.size(),
        run.heuristic_rank == 1
            ? ": the simulation agrees"
            : ", " + versus_winner(r.results[run.heuristic_rank - 1].result.step_time_s, best));
  else if (run.heuristic_eval && run.heuristic_eval->error.empty())
    out +=
        fmt::format("seed heuristic ({}): {} → not in the searched space; simulated {:.3f} s, {}\n",
                    why, h, run.heuristic_eval->result.step_time_s,
                    versus_winner(run.heuristic_eval->result.step_time_s, best));
  else
    out += fmt::format("seed heuristic ({}): {} → does not run here{}\n", why, h,
                       run.heuristic_eval ? " (" + run.heuristic_eval->error + ")" : "");
  out += "heuristics pick candidates; the simulation picks the winner\n";
  if (!run.launch.empty()) out += "\n" + run.launch;
  return out;
}

}  // namespace meshsim
