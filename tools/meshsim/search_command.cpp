// meshsim search --topology T [--nodes N] --workload W [job flags] [--tp 8 ...] [--top K]
//                [--csv F] [--json] [--emit megatron|torchtitan|accelerate|torchrun]
//                [--time-budget S]
//                [--sweep-nodes 8,16,32 --scaling strong|weak]
// Every valid mesh for the job, pruned (invalid, does not fit, dominated), simulated and ranked,
// with why the winner wins and how the seed guide's heuristic starting point compares.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "commands.hpp"
#include "compute/compute_model.hpp"
#include "job_args.hpp"
#include "progress.hpp"
#include "report/launch_config.hpp"
#include "report/scaling_sweep.hpp"
#include "report/search_report.hpp"
#include "search/distributed.hpp"
#include "search/search.hpp"
#include "topology/path_class.hpp"

namespace meshsim::cli {
namespace {

struct SearchArgs {
  ClusterArgs cluster;
  std::string workload, dtype, attention = "flash", recompute, schedule, csv, emit, sweep, report,
                               scaling = "strong", calibration, tp_overlap, ep_dispatch;
  std::vector<std::string> cp_comm;            // --cp-comm ring[,allgather]
  std::vector<std::string> recompute_modules;  // what selective candidates recompute
  std::string seq;
  std::int64_t gbs = 0, tp = 0, pp = 0, cp = 0, dp = 0, ep = 0, mbs = 0;
  std::int32_t zero = -1, top = 10, threads = 0;
  double time_budget_s = 0;  // 0: none
  bool allow_tp_across_nodes = false;
  bool no_hsdp = false;
  bool plain_split = false;  // --plain-split: the stack's own pipeline split, its switches unset
  bool exhaustive = false;   // simulate every candidate, not only those that can reach the top K
  bool quiet = false;        // no progress on stderr
  std::vector<std::string> stacks{"megatron"};  // --stack a,b
};

// SIGINT/SIGTERM during a search: the workers finish the simulation in hand, the rest are
// skipped, and what was simulated is ranked and printed (then exit 128 + the signal, as a shell
// expects). The handler is reset by the first signal, so a second one ends the process at once.
std::atomic<bool> g_interrupted{false};
volatile std::sig_atomic_t g_signal = 0;
static_assert(std::atomic<bool>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");

extern "C" void on_search_signal(int sig) {
  g_signal = sig;
  g_interrupted.store(true);
}

void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_search_signal;
  sa.sa_flags = static_cast<int>(SA_RESETHAND);
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

SearchSpace space_of(const SearchArgs& a) {
  SearchSpace s;
  auto pin = [](std::int64_t v, const char* flag) -> std::optional<std::int64_t> {
    if (v < 0) throw Error("", flag, "must be a positive integer");
    if (v == 0) return std::nullopt;
    return v;
  };
  s.tp = pin(a.tp, "--tp");
  s.pp = pin(a.pp, "--pp");
  s.cp = pin(a.cp, "--cp");
  s.dp = pin(a.dp, "--dp");
  s.ep = pin(a.ep, "--ep");
  s.mbs = pin(a.mbs, "--mbs");
  if (s.mbs) s.micro_batches = {*s.mbs};
  if (a.zero >= 0) {
    if (a.zero > 3) throw Error("", "--zero", "must be 0, 1, 2 or 3");
    s.zero = a.zero;
  }
  if (!a.recompute.empty()) {
    s.recompute = parse_recompute(a.recompute);
    if (!s.recompute)
      throw Error("", "--recompute", "'" + a.recompute + "': expected none, selective or full");
  }
  if (!a.schedule.empty()) s.schedule = parse_schedule(a.schedule, "--schedule");
  s.allow_tp_across_nodes = a.allow_tp_across_nodes;
  s.no_hsdp = a.no_hsdp;
  return s;
}

// "8,16,32" → node counts.
std::vector<std::int32_t> parse_nodes(const std::string& text) {
  std::vector<std::int32_t> out;
  for (auto v : parse_count_list(text, "--sweep-nodes", "node counts like 8,16,32", 100000))
    out.push_back(static_cast<std::int32_t>(v));
  return out;
}

int run_sweep(const SearchArgs& a, const ModelSpec& model, const SearchJob& base,
              const SearchSpace& space, SearchOptions opt) {
  const bool weak = a.scaling == "weak";
  if (!weak && a.scaling != "strong")
    throw Error("", "--scaling", "'" + a.scaling + "': expected strong or weak");
  const auto nodes = parse_nodes(a.sweep);
  ScalingSweep sweep{weak, model.name, nodes.front(), {}};
  // --json: stdout is the one document at the end; text: a row as each point is simulated.
  if (!a.cluster.json) cli_out() << sweep_header_text(sweep);
  for (auto n : nodes) {
    TopologyOptions to;
    to.nodes = n;
    auto topo = load_topology(a.cluster.topology, to);
    opt.profile = calibration_for(topo, a.calibration);
    SearchJob job = base;
    if (weak) job.global_batch = base.global_batch * n / sweep.first_nodes;
    const auto r = run_search(topo, model, job, space, opt);
    SweepPoint point{n, static_cast<double>(topo.gpus().size()), job.global_batch, {}};
    if (!r.results.empty() && r.results.front().error.empty()) {
      const auto& best = r.results.front();
      const auto* ref = efficiency_reference(sweep);
      const double ref_tokens = ref ? ref->best->tokens_per_s : best.result.tokens_per_s;
      const double ref_gpus = ref ? ref->gpus : point.gpus;
      point.best = SweepBest{
          best.result.tokens_per_s, best.result.mfu,
          scaling_efficiency(weak, best.result.tokens_per_s, point.gpus, ref_tokens, ref_gpus),
          best.candidate.label()};
    }
    sweep.points.push_back(point);
    if (!a.cluster.json) cli_out() << sweep_row_text(point);
  }
  cli_out() << (a.cluster.json ? json_text(sweep_json(sweep)) + "\n" : sweep_footer_text(sweep));
  return 0;
}

int run_search_command(const SearchArgs& a) {
  catch_interrupts();
  JobArgs ja;
  ja.workload = a.workload;
  ja.mesh = "dp=1";
  ja.dtype = a.dtype;
  ja.attention = a.attention;
  ja.seq = a.seq;
  ja.gbs = a.gbs;
  const auto resolved = ja.resolve();
  const auto& model = resolved.workload.model;
  SearchJob job{resolved.seq, a.gbs > 0 ? a.gbs : resolved.workload.job.global_batch.value_or(0),
                resolved.dtype, resolved.flash_attention};
  if (job.seq < 1) throw Error("", "--seq", "give the sequence length (or a job file with seq)");
  if (job.global_batch < 1)
    throw Error("", "--gbs", "give the global batch (sequences per step) or a job file with it");
  const auto space = space_of(a);
  if (!a.emit.empty() && a.emit != "megatron" && a.emit != "torchtitan" && a.emit != "accelerate" &&
      a.emit != "torchrun")
    throw Error("", "--emit",
                "'" + a.emit + "': expected megatron, torchtitan, accelerate or torchrun");
  SearchOptions opt;
  opt.threads = a.threads;
  // A stack renamed for the CP exchange it was tried with → the stack a launch line runs.
  std::map<std::string, std::string> base_stack;
  {
    // One stack, or several to compare (every layout on each).
    for (const auto& n : a.stacks) opt.stacks.push_back(resolve_stack(n));
    // A pinned ZeRO stage and schedule every stack runs (each stack's search tries only its
    // own).
    for (const auto& st : opt.stacks) {
      if (space.zero && !st.runs_zero(*space.zero))
        throw Error("", "--zero",
                    fmt::format("stack '{}' runs ZeRO stage {} only, not {}", st.name,
                                st.zero_stages_text(), *space.zero));
      if (space.schedule)
        if (auto why = unrun_schedule(st, schedule_family(*space.schedule)))
          throw Error("", "--schedule", *why);
    }
    if (!a.ep_dispatch.empty()) {
      const auto dispatch = ep_dispatch_flag(a.ep_dispatch, "--ep-dispatch");
      for (auto& st : opt.stacks) st = with_ep_dispatch(std::move(st), dispatch);
    }
    if (!a.recompute_modules.empty())
      for (auto& st : opt.stacks)
        st = with_recompute_modules(std::move(st), a.recompute_modules, "--recompute-modules");
    if (a.cp_comm.size() == 1) {
      const auto comm = cp_comm_flag(a.cp_comm.front(), "--cp-comm");
      for (auto& st : opt.stacks) st = with_cp_comm(std::move(st), comm);
    } else if (a.cp_comm.size() == 2) {
      // Both exchanges: each stack twice, the one that is not the stack's own as a twin named
      // for it ("megatron +allgather"), which tries only the layouts with CP (the others run the
      // same step on the stack itself).
      const CpComm both[] = {cp_comm_flag(a.cp_comm[0], "--cp-comm"),
                             cp_comm_flag(a.cp_comm[1], "--cp-comm")};
      if (both[0] == both[1])
        throw Error("", "--cp-comm", "give ring, allgather or both, once each");
      std::vector<Stack> twins;
      for (const auto& st : opt.stacks)
        for (const auto comm : both) {
          Stack v = with_cp_comm(st, comm);
          if (comm != st.cp_comm) {
            v.name += " +" + std::string(name_of(comm));
            base_stack[v.name] = st.name;
            opt.cp_only.insert(v.name);
          }
          twins.push_back(std::move(v));
        }
      opt.stacks = std::move(twins);
    } else if (a.cp_comm.size() > 2) {
      throw Error("", "--cp-comm", "give ring, allgather or both, once each");
    }
    opt.strategy.stack = opt.stacks.front();
    if (opt.stacks.size() == 1) opt.stacks.clear();
    if (!a.tp_overlap.empty()) opt.strategy.tp_overlap = on_off(a.tp_overlap, "--tp-overlap");
    opt.strategy.tune_split = !a.plain_split;
  }
  opt.memory.recipe = stack_recipe(opt.strategy.stack, job.dtype);
  if (!a.sweep.empty()) return run_sweep(a, model, job, space, opt);

  auto topo = a.cluster.load();
  opt.profile = calibration_for(topo, a.calibration);
  const auto gpus = static_cast<std::int64_t>(topo.gpus().size());
  // Under mpirun the candidates are split across ranks; rank 0 merges and prints.
  struct World {
    MpiWorld w = mpi_start();
    ~World() { mpi_finish(w); }
  } world;
  const auto t0 = std::chrono::steady_clock::now();
  if (a.time_budget_s > 0)
    opt.deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(a.time_budget_s));
  opt.interrupted = &g_interrupted;
  // Progress on stderr (progress.hpp), from rank 0 only.
  if (world.w.rank == 0) {
    // With --exhaustive every layout is simulated; otherwise the bounds rule most of them out.
    auto progress = std::make_shared<Progress>(
        "layouts simulated", a.quiet,
        a.exhaustive ? Progress::Total::exact : Progress::Total::at_most);
    opt.progress = [progress](std::size_t done, std::size_t total) {
      progress->update(done, total);
    };
  }
  SearchResult r;
  r.enumeration = enumerate_search(topo, model, job, space, opt);
  opt.top_k = a.exhaustive ? 0 : static_cast<std::size_t>(a.top);
  opt.contexts = std::make_shared<ContextPool>(topo);
  // The seed guide's starting point, ranked against the simulation below (its rank is exact
  // when it is within reach of the K-th best: the bounded search then simulates whatever could
  // beat it).
  std::string heuristic_why;
  auto heuristic =
      seed_heuristic(model, job, gpus, topo.gpus_per_node(), topo.gpu, opt.memory, &heuristic_why);
  if (!opt.stacks.empty()) heuristic.stack = opt.strategy.stack.name;
  apply_stack_policy(heuristic, opt.strategy.stack);
  bool heuristic_rank_exact = true;
  {
    auto ev = evaluate_top_k(
        topo, model, job, r.enumeration.kept, opt,
        [&](const std::vector<Candidate>& cs, const SearchOptions& o) {
          return evaluate_distributed(world.w, topo, model, job, cs, o);
        },
        [&](double v) { return broadcast_from_root(world.w, v); }, heuristic.label());
    r.results = std::move(ev.results);
    if (ev.bounded_out > 0) r.enumeration.rejected[kBoundedOut] += ev.bounded_out;
    heuristic_rank_exact = ev.anchor_rank_exact;
    r.tp_best_at_least = std::move(ev.tp_best_at_least);
  }
  if (world.w.rank != 0) return 0;
  rank_results(r.results);
  const auto skipped =
      static_cast<std::size_t>(std::count_if(r.results.begin(), r.results.end(), not_simulated));
  const bool interrupted = g_interrupted.load();
  const std::string stopped =
      skipped == 0 ? ""
                   : fmt::format(
                         "{}: {} of {} layouts not simulated; the ranking covers the {} "
                         "that were",
                         interrupted ? "interrupted" : "time budget reached", skipped,
                         r.results.size(), r.results.size() - skipped);
  // Exit status of an interrupted search, once what it simulated has been printed.
  const int exit_code = interrupted ? 128 + static_cast<int>(g_signal) : 0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t heuristic_rank = 0;
  for (std::size_t i = 0; i < r.results.size(); ++i)
    if (r.results[i].error.empty() && r.results[i].candidate.label() == heuristic.label())
      heuristic_rank = i + 1;
  std::optional<EvaluatedCandidate> heuristic_eval;
  if (heuristic_rank == 0 && !interrupted) {
    SearchOptions one;
    one.profile = opt.profile;
    one.strategy = opt.strategy;
    one.memory = opt.memory;
    auto ev = evaluate_candidates(topo, model, job, {heuristic}, one);
    heuristic_eval = std::move(ev.front());
  }
  if (!a.csv.empty())
    write_output(a.csv, "--csv", [&](std::ostream& f) { write_search_csv(r.results, f); });
  // The winner as the launch configuration asked for (text and --json alike).
  std::string launch;
  if (!a.emit.empty() && !r.results.empty() && r.results.front().error.empty()) {
    const auto& best = r.results.front();
    LaunchJob lj;
    lj.seq = job.seq;
    lj.global_batch = job.global_batch;
    lj.micro_batch = best.candidate.micro_batch;
    lj.dtype = job.dtype;
    lj.nodes = static_cast<std::int64_t>(topo.node_count());
    lj.gpus_per_node = topo.gpus_per_node();
    // The winner's stack (one of several when the search compared them).
    const auto strategy = setup_of(best.candidate, job, opt).strategy;
    LaunchStack ls;
    ls.name = base_stack.contains(strategy.stack.name) ? base_stack.at(strategy.stack.name)
                                                       : strategy.stack.name;
    ls.tp_overlap = strategy.tp_overlap.value_or(strategy.stack.tp_overlap.on);
    ls.fused_loss = runs_fused_loss(strategy.stack);
    ls.deepep = strategy.stack.ep_dispatch == EpDispatch::deepep;
    ls.cp_comm = strategy.stack.cp_comm;
    ls.fp8_fsdp_all_gather = strategy.stack.fp8_fsdp_all_gather;
    ls.fp8_params = strategy.stack.fp8_params;
    ls.pipeline_split = strategy.stack.pipeline_split;
    ls.chunk_layers = best.result.chunk_layers;
    launch = launch_config(a.emit, model, best.candidate.config, lj, ls);
  }
  if (!a.report.empty() && !r.results.empty() && r.results.front().error.empty() && !interrupted) {
    // The winner again, with its trace, for the timeline, as the search ran it (its stack,
    // calibration and memory recipe).
    const auto& best = r.results.front();
    const auto winner = simulate_training(topo, model, setup_of(best.candidate, job, opt));
    HtmlReport rep;
    rep.title = fmt::format("meshsim search: {} on {} GPUs, seq {}, global batch {}", model.name,
                            gpus, job.seq, job.global_batch);
    rep.ranked = report_candidates(r.results);
    SearchSummary sum;
    sum.combinations = r.enumeration.total;
    sum.rejected = r.enumeration.rejected;
    sum.moved_layers = r.enumeration.moved_layers;
    sum.top = static_cast<std::size_t>(std::max(a.top, 1));
    sum.heuristic_label = heuristic.label();
    sum.heuristic_rule = heuristic_why;
    sum.heuristic_rank = heuristic_rank;
    sum.heuristic_rank_exact = heuristic_rank_exact;
    sum.tp_best_at_least = r.tp_best_at_least;
    if (heuristic_eval && heuristic_eval->error.empty())
      sum.heuristic_step_s = heuristic_eval->result.step_time_s;
    sum.launch_format = a.emit;
    sum.launch = launch;
    sum.stack = opt.strategy.stack.name;
    sum.stack_description = opt.strategy.stack.description;
    sum.kernel_model = ComputeModel(topo.gpu, opt.profile).describe();
    sum.job = fmt::format("{}, sequence {}, global batch {}, {}, {} attention", model.name, job.seq,
                          job.global_batch, name_of(job.dtype),
                          job.flash_attention ? "fused (flash)" : "unfused");
    rep.search = std::move(sum);
    rep.trace = &winner.trace;
    rep.replay = &winner.replay;
    rep.notes = winner.notes;
    write_report(a.report, std::move(rep), topo, a.cluster.topology);
  }
  SearchRun run;
  run.model = model.name;
  run.cluster = std::filesystem::path(a.cluster.topology).stem().string();
  run.gpu = topo.gpu.model;
  run.gpus = gpus;
  run.job = job;
  const ComputeModel kernels(topo.gpu, opt.profile);
  run.kernel_model = kernels.describe();
  run.stack = opt.strategy.stack.name;
  for (const auto& st : opt.stacks) run.stacks_compared.push_back(st.name);
  run.recompute_modules = a.recompute_modules;
  run.notes = idle_module_notes(opt.strategy.stack, a.recompute_modules, model);
  run.result = &r;
  run.skipped = skipped;
  run.stopped = stopped;
  run.top = static_cast<std::size_t>(std::max(a.top, 1));
  run.top_k = opt.top_k;
  run.host_column = kernels.host_per_kernel_s() > 0;
  run.heuristic_label = heuristic.label();
  run.heuristic_rule = heuristic_why;
  run.heuristic_rank = heuristic_rank;
  run.heuristic_rank_exact = heuristic_rank_exact;
  if (heuristic_eval) run.heuristic_eval = &*heuristic_eval;
  if (gpus > 1) {
    Router router(topo);
    const auto cls = classify(topo, router.gpu_route(0, 1));
    if (cls == PathClass::PIX || cls == PathClass::PXB || cls == PathClass::PHB ||
        cls == PathClass::SYS)
      run.pcie = cls;
  }
  run.launch_format = a.emit;
  run.launch = launch;
  if (a.cluster.json) {
    cli_out() << json_text(search_json(run)) << "\n";
    return exit_code;
  }
  // Wall time goes to stderr: stdout stays byte-identical from run to run.
  cli_err() << fmt::format(
      "# {} simulations in {:.1f} s ({:.1f}/s, {} threads × {} processes)\n",
      r.results.size() - skipped, wall,
      wall > 0 ? static_cast<double>(r.results.size() - skipped) / wall : 0.0,
      opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency()),
      world.w.size);
  cli_out() << search_text(run);
  return exit_code;
}

}  // namespace

Runner add_search_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("search", "Rank every valid mesh for a training job on a cluster");
  auto a = std::make_shared<SearchArgs>();
  a->cluster.add_to(cmd);
  cmd->add_option("--workload", a->workload, "Model or job file (workloads/)")->required();
  cmd->add_flag("--quiet", a->quiet,
                "No progress on stderr (a line every 5 s when not a terminal)");
  cmd->add_option("--seq", a->seq, "Sequence length in tokens (8192, 8k, 128K)");
  cmd->add_option("--gbs", a->gbs, "Global batch (sequences)");
  cmd->add_option("--dtype", a->dtype, "bf16, fp16 or fp8");
  cmd->add_option("--attention", a->attention, "flash (default) or unfused");
  for (auto [flag, var] : {std::pair{"--tp", &a->tp},
                           {"--pp", &a->pp},
                           {"--cp", &a->cp},
                           {"--dp", &a->dp},
                           {"--ep", &a->ep},
                           {"--mbs", &a->mbs}})
    cmd->add_option(flag, *var, "Pin this dimension");
  cmd->add_option("--zero", a->zero, "Pin the ZeRO stage");
  cmd->add_option("--recompute", a->recompute, "Pin recompute: none, selective or full");
  cmd->add_option("--recompute-modules", a->recompute_modules,
                  "Selective candidates recompute these modules of the stack (megatron: "
                  "core_attn, moe_act, layernorm, mla_up_proj, mlp, shared_experts)")
      ->delimiter(',');
  cmd->add_option("--stack", a->stacks,
                  "Software stack (default megatron), or several to compare: megatron,torchtitan")
      ->delimiter(',');
  cmd->add_option("--tp-overlap", a->tp_overlap, "TP communication overlap on or off");
  cmd->add_option("--ep-dispatch", a->ep_dispatch,
                  "MoE token dispatch: all_to_all (NCCL) or deepep (a token crosses to each node "
                  "once); default the stack's");
  cmd->add_option("--cp-comm", a->cp_comm,
                  "Context parallel K/V for every stack: ring, allgather, or ring,allgather to "
                  "compare both (default: each stack's)")
      ->delimiter(',');
  cmd->add_option(
      "--schedule", a->schedule,
      "Pin the schedule: 1f1b, interleaved:V[:G], interleaved-overlap:V[:G], zb, gpipe, "
      "1f1b-overlap (pp = 1)");
  cmd->add_flag("--allow-tp-across-nodes", a->allow_tp_across_nodes, "Let TP span nodes");
  cmd->add_flag("--no-hsdp", a->no_hsdp,
                "Do not try ZeRO-3 layouts as HSDP (shard over a sub-group of DP)");
  cmd->add_flag("--plain-split", a->plain_split,
                "Split pipeline layers as the stack does without its end switches (default: "
                "set them, e.g. Megatron's --decoder-last-pipeline-num-layers, to balance the "
                "stages)");
  cmd->add_option("--top", a->top, "Candidates to print (default 10)")->check(positive_count());
  cmd->add_flag("--exhaustive", a->exhaustive,
                "Simulate every candidate (default: only those whose step-time lower bound can "
                "reach the top K; the top K is the same)");
  cmd->add_option("--csv", a->csv, "Write every evaluated candidate as CSV");
  cmd->add_option("--report", a->report, "Write an HTML report with plots");
  cmd->add_option("--threads", a->threads, "Worker threads (default: all)")
      ->check(positive_count());
  cmd->add_option("--time-budget", a->time_budget_s,
                  "Stop simulating after S seconds and rank what was simulated (SIGINT and "
                  "SIGTERM do the same, then exit 130/143)")
      ->check(number_in(0.001, 1e7));
  cmd->add_option("--calibration", a->calibration,
                  "Calibration profile (JSON; default: the one the cluster file names)");
  cmd->add_option("--emit", a->emit,
                  "Print the winner as megatron, torchtitan, accelerate or torchrun");
  cmd->add_option("--sweep-nodes", a->sweep, "Scaling sweep over node counts, e.g. 8,16,32,64");
  cmd->add_option("--scaling", a->scaling, "strong (fixed global batch) or weak");
  return [a] { return run_search_command(*a); };
}

}  // namespace meshsim::cli
