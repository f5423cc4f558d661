// meshsim serve --topology T --workload W --mesh tp=..,pp=.. --replicas R [--disaggregate P:D]
//               [--dtype bf16|fp8] [--kv-dtype bf16|fp8]
//               (--traffic FILE | --rate QPS|inf --requests N --prompt DIST --output DIST)
//               [--slo-ttft S --slo-tpot S] [--router ...] [scheduler flags]
//               [--search --gpus N [--emit vllm|sglang]] [--json] [--trace F] [--report F]
// A serving cluster simulated request by request: TTFT, TPOT, ITL, E2E percentiles, throughput,
// goodput under the SLOs, preemptions and KV utilisation; or, with --search, every (TP, PP,
// replicas) layout for a GPU budget compared under the same traffic.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "commands.hpp"
#include "compute/calibration_profile.hpp"
#include "compute/compute_model.hpp"
#include "job_args.hpp"
#include "model/model_registry.hpp"
#include "model/workload.hpp"
#include "parallel/mesh.hpp"
#include "parallel/mesh_rules.hpp"
#include "progress.hpp"
#include "report/launch_config.hpp"
#include "report/serving_report.hpp"
#include "search/serving_search.hpp"
#include "serving/engine.hpp"
#include "serving/serving_sim.hpp"

namespace meshsim::cli {
namespace {

struct ServeArgs {
  ClusterArgs cluster;
  std::string workload, mesh = "tp=1", disaggregate, dtype = "bf16", traffic, rate,
                        prompt = "fixed:1024", output = "fixed:256", router = "least-outstanding",
                        calibration, trace, report, emit, think_time = "0", engine = "vllm",
                        prefix_share, speculative;
  std::optional<std::string> prefix_caching, preemption, admission;
  std::optional<double> swap_space;
  std::optional<double> acceptance;
  std::int64_t replicas = 1, requests = 1000, seed = 1, gpus = 0, concurrency = 0;
  double burstiness = 1, slo_ttft = 2.0, slo_tpot = 0.2;
  // Unset: the engine profile's.
  std::optional<std::string> kv_dtype;
  std::optional<std::int64_t> max_batch_tokens, max_seqs, block_size;
  std::optional<double> gpu_memory_utilization, watermark;
  bool search = false, requests_given = false, quiet = false;
};

RouterPolicy router_flag(const std::string& v) {
  for (auto p :
       {RouterPolicy::round_robin, RouterPolicy::least_outstanding, RouterPolicy::jsq_tokens})
    if (v == name_of(p)) return p;
  throw Error("", "--router", "'" + v + "': expected round-robin, least-outstanding or jsq-tokens");
}

ReplicaShape shape_of(const ServeArgs& a, const EngineProfile& engine) {
  const Mesh m = parse_mesh(a.mesh, "--mesh");
  if (m.dp != 1 || m.cp != 1 || m.ep != 1)
    throw Error("", "--mesh",
                "'" + a.mesh + "': serving takes tp and pp per replica; use --replicas for copies");
  ReplicaShape s;
  s.tp = m.tp;
  s.pp = m.pp;
  s.weight_dtype = dtype_flag(a.dtype, "--dtype");
  s.kv_dtype =
      a.kv_dtype ? dtype_flag(*a.kv_dtype, "--kv-dtype") : default_kv_dtype(engine, s.weight_dtype);
  for (auto [dt, flag] :
       {std::pair{s.weight_dtype, "--dtype"}, std::pair{s.kv_dtype, "--kv-dtype"}})
    if (dt != DType::bf16 && dt != DType::fp16 && dt != DType::fp8)
      throw Error("", flag, "serving supports bf16, fp16 or fp8");
  return s;
}

// --speculative mtp:K|MODEL:K --acceptance P (ServingSetup::speculative).
void speculative_of(const ServeArgs& a, ServingSetup& setup) {
  if (a.speculative.empty()) {
    if (a.acceptance)
      throw Error("", "--acceptance", "applies to speculative decoding (--speculative)");
    return;
  }
  const auto colon = a.speculative.rfind(':');
  const auto bad = [&] {
    return Error("", "--speculative",
                 "'" + a.speculative +
                     "': expected mtp:K or MODEL:K (a draft model file), K from 1 to 16 draft "
                     "tokens per step");
  };
  if (colon == std::string::npos || colon == 0) throw bad();
  const auto k = parse_count_list(a.speculative.substr(colon + 1), "--speculative",
                                  "K from 1 to 16 draft tokens per step", 16);
  if (k.size() != 1) throw bad();
  auto& spec = setup.speculative;
  spec.tokens = k.front();
  const auto who = a.speculative.substr(0, colon);
  if (who == "mtp") {
    spec.proposer = Proposer::mtp;
  } else {
    spec.proposer = Proposer::draft_model;
    spec.draft = load_workload_or_model_id(who, hf_hub_cache_dir()).model;
    if (!spec.draft->has_architecture())
      throw Error(who, "", "a draft model needs its architecture, not only its size");
  }
  if (!a.acceptance) throw Error("", "--acceptance", "speculative decoding needs --acceptance P");
  if (!(*a.acceptance >= 0) || *a.acceptance > 1)
    throw Error("", "--acceptance", "must be a probability from 0 to 1");
  spec.acceptance = *a.acceptance;
  spec.seed = static_cast<std::uint64_t>(a.seed) ^ 0x7370656344ULL;  // "specD"
  if (a.search) throw Error("", "--speculative", "--search compares layouts without it");
}

// --concurrency C --think-time S|exp:MEAN: a closed loop of C clients (ServingSetup::clients).
void closed_loop_of(const ServeArgs& a, ServingSetup& setup) {
  if (a.concurrency == 0) {
    if (a.think_time != "0")
      throw Error("", "--think-time", "applies to a closed loop (--concurrency C)");
    return;
  }
  if (a.concurrency < 1 || a.concurrency > (std::int64_t{1} << 20))
    throw Error("", "--concurrency", "must be from 1 to 1048576 clients");
  if (!a.rate.empty())
    throw Error("", "--rate",
                "a closed loop (--concurrency) sets its own arrivals; give one of them");
  std::string_view t = a.think_time;
  setup.think_exponential = t.starts_with("exp:");
  if (setup.think_exponential) t.remove_prefix(4);
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(std::string(t), &used);
    if (used != t.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw Error("", "--think-time", "'" + a.think_time + "': expected seconds or exp:MEAN_SECONDS");
  }
  if (!std::isfinite(v) || v < 0 || v > 1e6)
    throw Error("", "--think-time", "must be from 0 to 1e6 seconds");
  setup.clients = a.concurrency;
  setup.think_time_s = v;
  setup.think_seed = static_cast<std::uint64_t>(a.seed) ^ 0x7468696e6bULL;  // "think"
}

std::vector<Request> requests_of(const ServeArgs& a, std::string& described) {
  if (a.requests < 1 || a.requests > (std::int64_t{1} << 26))
    throw Error("", "--requests", "must be from 1 to 67108864");
  const std::string loop =
      a.concurrency > 0
          ? fmt::format("closed loop of {} clients, think time {} s; ", a.concurrency, a.think_time)
          : "";
  if (a.concurrency > 0 && a.requests <= a.concurrency && (a.requests_given || a.traffic.empty()))
    throw Error("", "--requests",
                "must exceed --concurrency: the first C requests are warm-up, left out of the "
                "latency statistics");
  if (!a.traffic.empty()) {
    if (!a.rate.empty()) throw Error("", "--rate", "give either --traffic or --rate, not both");
    described = loop + a.traffic;
    auto reqs = load_traffic(a.traffic, a.requests_given ? a.requests : 0);
    if (!a.prefix_share.empty()) {
      if (std::any_of(reqs.begin(), reqs.end(),
                      [](const Request& r) { return r.prefix_group >= 0; }))
        throw Error("", "--prefix-share",
                    a.traffic + " names its own prefix groups; give one of them");
      const auto share = parse_prefix_share(a.prefix_share, "", "--prefix-share");
      apply_prefix_share(reqs, share, static_cast<std::uint64_t>(a.seed));
      described += ", " + share.describe();
    }
    if (a.concurrency > 0 && static_cast<std::int64_t>(reqs.size()) <= a.concurrency)
      throw Error(a.traffic, "",
                  fmt::format("{} requests: a closed loop of {} clients needs more "
                              "(the first {} are warm-up)",
                              reqs.size(), a.concurrency, a.concurrency));
    return reqs;
  }
  if (a.rate.empty() && a.concurrency == 0)
    throw Error("", "--rate", "give --rate QPS|inf, --concurrency C or --traffic FILE");
  if (a.seed < 0) throw Error("", "--seed", "must not be negative");
  TrafficSpec spec;
  // A closed loop takes only the lengths; its clients make the arrivals.
  spec.arrival = arrival_from_rate(a.concurrency > 0 ? "inf" : a.rate, a.burstiness, "--rate");
  spec.prompt = parse_length_dist(a.prompt, "", "--prompt");
  spec.output = parse_length_dist(a.output, "", "--output");
  spec.requests = a.requests;
  spec.seed = static_cast<std::uint64_t>(a.seed);
  if (!a.prefix_share.empty())
    spec.prefix = parse_prefix_share(a.prefix_share, "", "--prefix-share");
  described = loop + fmt::format("{} requests, {}prompt {}, output {}{}", spec.requests,
                                 a.concurrency > 0 ? "" : spec.arrival.describe() + ", ",
                                 spec.prompt.describe(), spec.output.describe(),
                                 spec.prefix.groups > 0 ? ", " + spec.prefix.describe() : "");
  return generate_requests(spec);
}

int run_serve(const ServeArgs& a) {
  auto topo = a.cluster.load();
  const auto workload = load_workload_or_model_id(a.workload, hf_hub_cache_dir());
  const auto& model = workload.model;
  ServingSetup setup;
  const auto engine = resolve_engine(a.engine);
  setup.shape = shape_of(a, engine);
  if (model.has_architecture() && !a.search) {
    // The same divisibility rules as memory and train (heads and KV heads by tp, layers by pp).
    // Sequence parallelism is a training layout: serving engines shard MoE experts over TP
    // without it, so that rule is not applied here.
    ParallelConfig check;
    check.mesh.tp = setup.shape.tp;
    check.mesh.pp = setup.shape.pp;
    check.sp = setup.shape.tp > 1;
    check_mesh(model, check, {});
  }
  setup.replicas = a.replicas;
  if (a.replicas < 1) throw Error("", "--replicas", "must be a positive integer");
  if (!a.disaggregate.empty()) {
    const auto colon = a.disaggregate.find(':');
    const auto bad = [&] {
      return Error("", "--disaggregate",
                   "'" + a.disaggregate + "': expected P:D, prefill and decode replica counts");
    };
    if (colon == std::string::npos) throw bad();
    const auto counts = [&](const std::string& t) {
      const auto v =
          parse_count_list(t, "--disaggregate", "P:D, prefill and decode replica counts", 1 << 20);
      if (v.size() != 1) throw bad();
      return v.front();
    };
    setup.prefill_replicas = counts(a.disaggregate.substr(0, colon));
    setup.decode_replicas = counts(a.disaggregate.substr(colon + 1));
    if (a.search) throw Error("", "--disaggregate", "--search compares colocated layouts only");
  }
  setup.scheduler = engine.scheduler;
  auto& sch = setup.scheduler;
  if (a.max_batch_tokens) sch.max_batch_tokens = *a.max_batch_tokens;
  if (a.max_seqs) sch.max_seqs = *a.max_seqs;
  if (a.block_size) sch.block_size = *a.block_size;
  if (a.gpu_memory_utilization) {
    sch.gpu_memory_utilization = *a.gpu_memory_utilization;
    sch.memory_fraction_by_tp.clear();  // the given fraction at every TP
  }
  if (a.admission) sch.admission = admission_flag(*a.admission);
  if (a.watermark) sch.watermark = *a.watermark;
  if (a.preemption) {
    if (*a.preemption == "recompute")
      sch.preemption = Preemption::recompute;
    else if (*a.preemption == "swap")
      sch.preemption = Preemption::swap;
    else
      throw Error("", "--preemption", "'" + *a.preemption + "': expected recompute or swap");
  }
  if (a.swap_space) {
    if (!(*a.swap_space >= 0) || *a.swap_space > 4096)
      throw Error("", "--swap-space", "must be from 0 to 4096 GiB per GPU");
    sch.swap_space_bytes = *a.swap_space * (1ull << 30);
  }
  if (a.prefix_caching) {
    if (*a.prefix_caching != "on" && *a.prefix_caching != "off")
      throw Error("", "--prefix-caching", "'" + *a.prefix_caching + "': expected on or off");
    sch.prefix_caching = *a.prefix_caching == "on";
  }
  if (sch.max_batch_tokens < 1 || sch.max_batch_tokens > (1 << 22))
    throw Error("", "--max-batch-tokens", "must be from 1 to 4194304");
  if (sch.max_seqs < 1 || sch.max_seqs > (1 << 20))
    throw Error("", "--max-seqs", "must be from 1 to 1048576");
  if (sch.block_size < 1 || sch.block_size > 4096)
    throw Error("", "--block-size", "must be from 1 to 4096");
  if (!(sch.gpu_memory_utilization > 0) || sch.gpu_memory_utilization > 1)
    throw Error("", "--gpu-memory-utilization", "must be in (0, 1]");
  if (!(sch.watermark >= 0) || sch.watermark >= 1)
    throw Error("", "--watermark", "must be in [0, 1)");
  if (sch.admission == Admission::reserve && sch.watermark > 0)
    throw Error("", "--watermark",
                "reserve admission (engine '" + engine.name +
                    "' or --admission) holds whole requests and keeps no watermark: add "
                    "--watermark 0");
  if (!(a.slo_ttft >= 0) || !(a.slo_tpot >= 0))
    throw Error("", "--slo-ttft", "SLOs must be non-negative seconds (0: none)");
  setup.slo_ttft_s = a.slo_ttft;
  setup.slo_tpot_s = a.slo_tpot;
  setup.router = router_flag(a.router);
  setup.profile = calibration_for(topo, a.calibration);
  setup.record_iterations = !a.trace.empty();
  closed_loop_of(a, setup);
  speculative_of(a, setup);
  std::string traffic;
  const auto requests = requests_of(a, traffic);
  const auto report_of = [&](std::string title, std::string layout) {
    ServingReport rep;
    rep.title = std::move(title);
    rep.command = command_line();
    rep.cluster = topo.name;
    rep.gpu = topo.gpu.model;
    rep.layout = std::move(layout);
    rep.traffic = traffic;
    rep.slo_ttft_s = a.slo_ttft;
    rep.slo_tpot_s = a.slo_tpot;
    return rep;
  };
  const auto save_report = [](const std::string& path, const ServingReport& rep) {
    write_output(path, "--report", [&](std::ostream& out) { out << render_serving_html(rep); });
  };

  if (a.search) {
    if (a.gpus < 1) throw Error("", "--gpus", "--search needs the GPU budget --gpus N");
    const auto found = search_serving(topo, model, setup, requests, a.gpus);
    if (a.cluster.json)
      cli_out() << json_text(serving_search_json(found)) << "\n";
    else
      cli_out() << serving_search_text(
          found, {model.name, topo.name, traffic, a.gpus, a.slo_ttft, a.slo_tpot});
    if (!a.emit.empty()) {
      const auto& best = found.candidates.front();
      if (!best.refused.empty()) throw Error("", "--emit", "no layout fits: nothing to emit");
      cli_err() << serving_launch_config(a.emit, model, best.shape, best.replicas, setup.scheduler);
    }
    if (!a.report.empty()) {
      auto rep = report_of(fmt::format("meshsim serve --search: {} on {} GPUs", model.name, a.gpus),
                           "compared below");
      rep.search = &found;
      save_report(a.report, rep);
    }
    return 0;
  }

  // Progress on stderr (progress.hpp): worth it past a few thousand requests.
  if (requests.size() >= 10000) {
    auto progress = std::make_shared<Progress>("requests served", a.quiet);
    setup.progress = [progress](std::size_t done, std::size_t total) {
      progress->update(done, total);
    };
  }
  const auto r = simulate_serving(topo, model, setup, requests);
  const auto layout =
      fmt::format(
          "{} × tp={} pp={} ({} weights, {} KV, engine {}){}", setup.total_replicas(),
          setup.shape.tp, setup.shape.pp, a.dtype, name_of(setup.shape.kv_dtype), engine.name,
          setup.disaggregated()
              ? fmt::format(", disaggregated {}:{}", setup.prefill_replicas, setup.decode_replicas)
              : "") +
      (setup.speculative.enabled() ? ", speculative: " + setup.speculative.describe() : "");
  if (a.cluster.json) {
    cli_out() << json_text(serving_run_json(r, engine.name, sch, setup.shape.tp)) << "\n";
  } else {
    cli_out() << fmt::format("# {} on {}: {}\n# traffic: {}\n# kernel model: {}\n", model.name,
                             topo.name, layout, traffic,
                             ComputeModel(topo.gpu, setup.profile).describe());
    cli_out() << serving_summary_text(r);
  }
  if (!a.emit.empty())
    cli_err() << serving_launch_config(a.emit, model, setup.shape, setup.total_replicas(),
                                       setup.scheduler);
  if (!a.trace.empty()) {
    write_output(a.trace, "--trace", [&](std::ostream& out) { write_serving_trace(r, out); });
  }
  if (!a.report.empty()) {
    auto rep = report_of(fmt::format("meshsim serve: {} on {}", model.name, topo.name), layout);
    rep.result = &r;
    save_report(a.report, rep);
  }
  return 0;
}

}  // namespace

Runner add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Simulate LLM serving: latency, throughput, goodput");
  a->cluster.add_to(cmd);
  cmd->add_option("--workload", a->workload, "Model file (workloads/models/*.json)")->required();
  cmd->add_option("--mesh", a->mesh, "Layout of one replica: tp=..,pp=..");
  cmd->add_option("--replicas", a->replicas, "Replicas behind the router");
  cmd->add_option("--disaggregate", a->disaggregate,
                  "P:D prefill and decode replicas (replaces --replicas)");
  cmd->add_option("--dtype", a->dtype, "Weights and GEMMs: bf16, fp16 or fp8");
  cmd->add_option("--kv-dtype", a->kv_dtype,
                  "KV cache: bf16, fp16 or fp8 (default: the engine's rule for the weight dtype)");
  cmd->add_option("--engine", a->engine,
                  "Serving engine: vllm (default), trtllm, sglang, or an engine file "
                  "(workloads/engines/*.json)");
  cmd->add_option("--traffic", a->traffic, "Traffic file: a CSV trace or a JSON spec");
  cmd->add_option("--rate", a->rate, "Arrival rate in requests/s, or inf (offline)");
  cmd->add_option("--concurrency", a->concurrency,
                  "Closed loop: C clients, each sending its next request when its last completes");
  cmd->add_option("--think-time", a->think_time,
                  "Closed loop: seconds between a completion and the client's next request, or "
                  "exp:MEAN for exponential think times");
  cmd->add_option("--burstiness", a->burstiness,
                  "Coefficient of variation of the gaps (1: Poisson; other: gamma)")
      ->check(number_in(1e-3, 100));
  auto* req = cmd->add_option("--requests", a->requests, "Requests to simulate");
  cmd->add_option("--prompt", a->prompt,
                  "Prompt length: fixed:N, uniform:LO,HI, lognormal:MEAN,SIGMA");
  cmd->add_option("--output", a->output, "Output length, same forms");
  cmd->add_option("--seed", a->seed, "Traffic seed");
  cmd->add_option("--slo-ttft", a->slo_ttft, "TTFT SLO in s (default 2, MLPerf Llama-2-70B server)")
      ->check(number_in(0, 1e6));
  cmd->add_option("--slo-tpot", a->slo_tpot, "TPOT SLO in s (default 0.2)")
      ->check(number_in(0, 1e6));
  cmd->add_option("--router", a->router, "round-robin, least-outstanding or jsq-tokens");
  cmd->add_option("--max-batch-tokens", a->max_batch_tokens,
                  "Token budget per iteration (default: the engine's)");
  cmd->add_option("--max-seqs", a->max_seqs, "Sequences per iteration (default: the engine's)");
  cmd->add_option("--block-size", a->block_size, "KV block size in tokens (default: the engine's)");
  cmd->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                  "The engine's KV memory fraction (vLLM: of all HBM, for weights, workspace and "
                  "KV; TensorRT-LLM: of the memory free after weights and workspace)");
  cmd->add_option("--watermark", a->watermark,
                  "Free-block fraction kept at admission (default: the engine's)");
  cmd->add_option("--admission", a->admission,
                  "Admission policy: optimistic (vLLM), reserve (TensorRT-LLM "
                  "GUARANTEED_NO_EVICT), max_utilization (TensorRT-LLM MAX_UTILIZATION) or ratio "
                  "(SGLang's new-token ratio) (default: the engine's)");
  cmd->add_option("--preemption", a->preemption,
                  "What preemption does with the KV cache: recompute or swap (default: the "
                  "engine's)");
  cmd->add_option("--swap-space", a->swap_space,
                  "Host swap space per GPU in GiB for --preemption swap (default: the engine's)");
  cmd->add_option("--prefix-caching", a->prefix_caching,
                  "Automatic prefix caching: on or off (default: the engine's)");
  cmd->add_option("--prefix-share", a->prefix_share,
                  "Shared prefixes GROUPS:TOKENS: each request joins one of GROUPS groups and "
                  "its first TOKENS prompt tokens are the group's");
  cmd->add_option("--speculative", a->speculative,
                  "Speculative decoding: mtp:K (an MTP head) or MODEL:K (a draft model file), "
                  "K draft tokens per step");
  cmd->add_option("--acceptance", a->acceptance,
                  "Probability a draft token is accepted given the ones before it were");
  cmd->add_option("--calibration", a->calibration, "Calibration profile (JSON)");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace of the iterations");
  cmd->add_option("--report", a->report, "Write an HTML report");
  cmd->add_flag("--search", a->search, "Compare every (TP, PP, replicas) layout for --gpus");
  cmd->add_flag("--quiet", a->quiet, "No progress on stderr (runs of 10,000 requests or more)");
  cmd->add_option("--gpus", a->gpus, "GPU budget of --search");
  cmd->add_option("--emit", a->emit, "Print launch lines to stderr: vllm or sglang");
  return [a, req] {
    a->requests_given = req->count() > 0;
    return run_serve(*a);
  };
}

}  // namespace meshsim::cli
