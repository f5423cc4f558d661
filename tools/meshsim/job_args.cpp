#include "job_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>

#include "commands.hpp"
#include "core/enum_names.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/model_registry.hpp"
#include "report/megatron_line.hpp"
#include "report/torchtitan_config.hpp"

namespace meshsim::cli {

bool on_off(const std::string& v, const std::string& flag) {
  if (v == "on") return true;
  if (v == "off") return false;
  throw Error("", flag, "'" + v + "': expected on or off");
}

EpDispatch ep_dispatch_flag(const std::string& v, const std::string& flag) {
  if (const auto d = parse_by_name<EpDispatch>(kAllEpDispatch, v)) return *d;
  throw Error("", flag, "'" + v + "': expected all_to_all or deepep");
}

CpComm cp_comm_flag(const std::string& v, const std::string& flag) {
  if (const auto c = parse_by_name<CpComm>(kAllCpComm, v)) return *c;
  throw Error("", flag, "'" + v + "': expected ring or allgather");
}

ResolvedGpu resolve_gpu(const std::string& gpu, const std::string& topology, std::int32_t nodes) {
  if (!topology.empty()) {
    if (!gpu.empty()) throw Error("", "--gpu", "give --gpu or --topology, not both");
    TopologyOptions opt;
    if (nodes < 0) throw Error("", "--nodes", "must be a positive integer");
    if (nodes > 0) opt.nodes = nodes;
    auto topo = load_topology(topology, opt);
    return {topo.gpu, std::move(topo)};
  }
  const std::string name = gpu.empty() ? "H100-SXM5-80GB" : gpu;
  if (auto g = find_gpu(name)) return {*g, std::nullopt};
  std::string known;
  for (const auto& g : gpu_catalogue()) known += (known.empty() ? "" : ", ") + g.model;
  throw Error("", "--gpu", "unknown GPU '" + name + "' (known: " + known + ")");
}

std::optional<CalibrationProfile> calibration_for(Topology& topo, const std::string& flag) {
  const std::string& file = flag.empty() ? topo.calibration_file : flag;
  if (file.empty()) return std::nullopt;
  auto profile = load_calibration_profile(file);
  for (const auto& line : apply_p2p_calibration(topo, profile.links))
    cli_err() << "calibration: " << line << "\n";
  return profile;
}

DType dtype_flag(const std::string& v, const std::string& flag) {
  if (auto d = parse_dtype(v)) return *d;
  throw Error("", flag, "'" + v + "': expected one of " + joined_names(kAllDTypes));
}

void write_output(const std::string& path, const std::string& flag,
                  const std::function<void(std::ostream&)>& write) {
  std::ofstream out(path);
  if (!out) throw Error("", flag, "cannot write '" + path + "'");
  write(out);
  out.flush();
  out.close();
  if (out.fail()) throw WriteError(path, "write failed (disk full or device error)");
}

std::vector<std::int64_t> parse_count_list(const std::string& text, const std::string& flag,
                                           const std::string& what, std::int64_t max) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const auto item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1 || v > max) throw std::invalid_argument("");
      out.push_back(v);
    } catch (const std::logic_error&) {
      throw Error("", flag, "'" + text + "': expected " + what);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::vector<std::int64_t> parse_stage_layers(const std::string& text) {
  return parse_count_list(text, "--stage-layers", "positive layer counts like 7,8,8,7",
                          std::int64_t{1} << 24);
}

void write_report(const std::string& path, HtmlReport report, const Topology& topo,
                  const std::string& cluster_file) {
  report.command = command_line();
  report.cluster = std::filesystem::path(cluster_file).stem().string();
  report.gpu = topo.gpu.model;
  report.gpu_bytes = topo.gpu.hbm_bytes.as_double();
  report.topology = summarize(topo, topo.gpus().size() <= 4096);
  write_output(path, "--report", [&](std::ostream& out) { out << render_html(report); });
}

void JobArgs::add_to(CLI::App* cmd) {
  cmd->add_option("--workload", workload, "Model or job file (workloads/)")->required();
  auto* mesh_opt = cmd->add_option(
      "--mesh", mesh,
      "dp=..,tp=..,pp=..,cp=..,ep=.. (fsdp=N: HSDP, shard over N of the dp ranks; without dp, "
      "the degree that fills the cluster); required unless --from-megatron gives it");
  auto* zero_opt = cmd->add_option("--zero", zero, "0 DDP, 1, 2, 3 (= FSDP)");
  cmd->add_option("--reshard-after-forward", reshard, "ZeRO-3/FSDP2: on or off");
  auto* recompute_opt =
      cmd->add_option("--recompute", recompute,
                      "The stack's policy (none, selective, full, or the stack's own names such as "
                      "torchtitan's op); default the stack's");
  auto* modules_opt =
      cmd->add_option(
             "--recompute-modules", recompute_modules,
             "Selective recompute of these modules of the stack (megatron: core_attn, moe_act, "
             "layernorm, mla_up_proj, mlp, shared_experts; comma-separated)")
          ->delimiter(',');
  auto* method_opt =
      cmd->add_option("--recompute-method", recompute_method,
                      "Full recompute as Megatron's --recompute-method: uniform (groups of "
                      "--recompute-num-layers layers share a checkpoint) or block (only the first "
                      "--recompute-num-layers layers of each pipeline chunk are recomputed)");
  auto* layers_opt = cmd->add_option("--recompute-num-layers", recompute_layers,
                                     "Layers of a uniform group or a block (default 1)");
  cmd->add_option("--stack", stack,
                  "Software stack: megatron (default; with --from-torchtitan, torchtitan or "
                  "torchtitan-compile as the config compiles), torchtitan, torchtitan-compile, "
                  "deepspeed, ideal, or a stack file (workloads/stacks/*.json)");
  cmd->add_option("--tp-overlap", tp_overlap,
                  "TP communication overlap on or off (default: the stack's; needs SP)");
  cmd->add_option("--ep-dispatch", ep_dispatch,
                  "MoE token dispatch: all_to_all (NCCL) or deepep (a token crosses to each node "
                  "once); default the stack's");
  auto* seq_opt = cmd->add_option("--seq", seq, "Sequence length in tokens (8192, 8k, 128K)");
  auto* gbs_opt = cmd->add_option("--gbs", gbs, "Global batch (sequences); default dp × mbs");
  auto* mbs_opt = cmd->add_option("--mbs", mbs, "Micro-batch (sequences); default 1");
  auto* steps_opt = cmd->add_option(
      "--pipeline-steps", pipeline_steps,
      "Run the step's micro-batches as this many pipeline schedules one after another, each "
      "with its own fill, drain and gradient sync (torchtitan's gradient accumulation under "
      "PP); default 1");
  auto* dtype_opt =
      cmd->add_option("--dtype", dtype, "bf16, fp16 or fp8 (GEMMs and, serving, weights)");
  auto* sp_opt =
      cmd->add_option("--sp", sp, "Sequence parallelism on or off (default on when tp > 1)");
  auto* schedule_opt = cmd->add_option("--schedule", schedule,
                                       "gpipe, 1f1b, interleaved:V[:G], interleaved-overlap:V[:G] "
                                       "(G: micro-batch group), zb or 1f1b-overlap (pp = 1)");
  cmd->add_option("--attention", attention, "flash (default) or unfused");
  for (auto* from :
       {cmd->add_option("--from-megatron", from_megatron,
                        "A Megatron-LM launch line (quoted) or script file: its parallelism, "
                        "batch, sequence, recompute and precision flags set the job (dp fills "
                        "the cluster)"),
        cmd->add_option("--from-torchtitan", from_torchtitan,
                        "A torchtitan job config (TOML): its [parallelism], [training], "
                        "[activation_checkpoint] and [float8] set the job")})
    for (auto* o : {mesh_opt, zero_opt, recompute_opt, modules_opt, method_opt, layers_opt, seq_opt,
                    gbs_opt, mbs_opt, dtype_opt, sp_opt, schedule_opt, steps_opt})
      from->excludes(o);
  cmd->get_option("--from-megatron")->excludes("--from-torchtitan");
}

JobArgs::Resolved JobArgs::resolve(std::int64_t world) const {
  Resolved r;
  r.workload = load_workload_or_model_id(workload, hf_hub_cache_dir());
  const auto& w = r.workload;
  r.dtype = !dtype.empty() ? dtype_flag(dtype, "--dtype") : w.job.dtype.value_or(DType::bf16);
  auto& cfg = r.config;
  r.stack = resolve_stack(stack.empty() ? "megatron" : stack);
  if (!tp_overlap.empty()) r.tp_overlap = on_off(tp_overlap, "--tp-overlap");
  cfg.reshard_after_forward = on_off(reshard, "--reshard-after-forward");
  // The layout, sequence and batch: from a launch configuration, or from the flags. 0: not
  // given (the job file's, or dp × micro-batch).
  std::int64_t seq_tokens = 0, global = gbs, micro = mbs;
  const bool launch = !from_megatron.empty() || !from_torchtitan.empty();
  std::string recompute_name = recompute.empty() ? r.stack.default_recompute : recompute;
  std::int32_t launch_every = 1;  // torchtitan's selective_ac_option N
  if (launch) {
    const auto m = launch_layout(w.model, world, cfg.reshard_after_forward);
    // The stack the configuration runs on, unless --stack / --tp-overlap say otherwise.
    if (stack.empty() && !m.stack.name.empty()) r.stack = resolve_stack(m.stack.name);
    if (tp_overlap.empty() && m.stack.tp_overlap) r.tp_overlap = true;
    if (m.stack.fused_loss) r.stack = with_fused_loss(std::move(r.stack));
    if (m.stack.deepep && ep_dispatch.empty())
      r.stack = with_ep_dispatch(std::move(r.stack), EpDispatch::deepep);
    if (m.stack.cp_comm) r.stack = with_cp_comm(std::move(r.stack), *m.stack.cp_comm);
    if (m.stack.fp8_params) r.stack = with_fp8_params(std::move(r.stack));
    if (m.stack.fp8_fsdp_all_gather)
      r.stack = with_fp8_fsdp_all_gather(std::move(r.stack), *m.stack.fp8_fsdp_all_gather);
    if (m.stack.pipeline_split)
      r.stack = with_pipeline_split(std::move(r.stack), *m.stack.pipeline_split);
    r.chunk_layers = m.chunk_layers;
    cfg = m.config;
    recompute_name = name_of(m.config.recompute);  // the stack's policy of that name
    // torchtitan's layer SAC: the stack's full policy of that period, or on a stack whose layer
    // policy takes any period its first such policy, at this one.
    if (m.config.recompute_every > 1) {
      const auto& ps = r.stack.recompute;
      auto it = std::find_if(ps.begin(), ps.end(), [&](const RecomputePolicy& p) {
        return p.mode == Recompute::full && p.every == m.config.recompute_every;
      });
      if (it == ps.end() && r.stack.recompute_layer_frequency)
        it = std::find_if(ps.begin(), ps.end(), [](const RecomputePolicy& p) {
          return p.mode == Recompute::full && p.every > 1;
        });
      if (it == ps.end())
        throw Error("", launch_flag(),
                    fmt::format("stack '{}' has no policy recomputing one layer in {}",
                                r.stack.name, m.config.recompute_every));
      recompute_name = it->name;
      launch_every = m.config.recompute_every;
    }
    r.dtype = m.job.dtype;
    seq_tokens = m.job.seq;
    global = m.job.global_batch;
    micro = m.job.micro_batch;
    r.pipeline_steps = m.job.pipeline_steps;
    if (global > 0)
      r.batch_from = {
          "", launch_source(),
          from_megatron.empty() ? " (training.global_batch_size)" : " (--global-batch-size)"};
    if (seq_tokens > (std::int64_t{1} << 24))
      throw Error("", launch_flag(), "the sequence must be at most 16777216 tokens");
    if (global > (std::int64_t{1} << 30) || micro > (std::int64_t{1} << 30))
      throw Error("", launch_flag(), "the batch is implausibly large");
  } else {
    if (mesh.empty())
      throw Error("", "--mesh",
                  "is required (or give the layout with --from-megatron or --from-torchtitan)");
    cfg.mesh = parse_mesh(mesh, "--mesh", world);
    cfg.zero = zero;
    cfg.sp = sp.empty() ? cfg.mesh.tp > 1 : on_off(sp, "--sp");
    cfg.schedule = parse_schedule(schedule, "--schedule");
  }
  if (!ep_dispatch.empty())
    r.stack = with_ep_dispatch(std::move(r.stack), ep_dispatch_flag(ep_dispatch, "--ep-dispatch"));
  if (!cp_comm.empty())
    r.stack = with_cp_comm(std::move(r.stack), cp_comm_flag(cp_comm, "--cp-comm"));
  if (!recompute_modules.empty()) {
    if (!recompute.empty() && recompute != "selective")
      throw Error("", "--recompute-modules", "needs --recompute selective (or no --recompute)");
    cfg.recompute_modules = recompute_modules;
  }
  const auto policy =
      cfg.recompute_modules.empty()
          ? recompute_policy(r.stack, recompute_name)
          : module_policy(r.stack, cfg.recompute_modules,
                          recompute_modules.empty() ? launch_flag() : "--recompute-modules");
  cfg.recompute = policy.mode;
  cfg.recompute_units = policy.units;
  cfg.recompute_modules = policy.modules;
  cfg.recompute_every = policy.every;
  if (launch_every > 1) cfg.recompute_every = launch_every;
  if (!recompute_method.empty() || recompute_layers > 0)
    set_recompute_method(
        cfg, recompute_method.empty() ? "uniform" : recompute_method,
        recompute_layers > 0 ? recompute_layers : 1,
        recompute_method.empty() ? "--recompute-num-layers" : "--recompute-method");
  r.flash_attention = attention == "flash";
  if (!r.flash_attention && attention != "unfused")
    throw Error("", "--attention", "'" + attention + "': expected flash or unfused");
  if (!launch) {
    seq_tokens = seq.empty() ? 0 : parse_token_count(seq, "", "--seq");
    if (!seq.empty() && seq_tokens < 1) throw Error("", "--seq", "must be a positive integer");
    // 16M tokens: well past any context a model supports, and far from integer overflow in
    // activation and FLOP counts.
    if (seq_tokens > (std::int64_t{1} << 24))
      throw Error("", "--seq", "must be at most 16777216 tokens");
    if (gbs > (std::int64_t{1} << 30) || mbs > (std::int64_t{1} << 30))
      throw Error("", gbs > (std::int64_t{1} << 30) ? "--gbs" : "--mbs", "is implausibly large");
    if (gbs < 0) throw Error("", "--gbs", "must be a positive integer");
    if (mbs < 0) throw Error("", "--mbs", "must be a positive integer");
    if (pipeline_steps < 1) throw Error("", "--pipeline-steps", "must be a positive integer");
    r.pipeline_steps = pipeline_steps;
  }
  r.seq = seq_tokens > 0 ? seq_tokens : w.job.seq.value_or(0);
  r.micro_batch = micro > 0 ? micro : w.job.micro_batch.value_or(1);
  r.global_batch = global > 0 ? global : w.job.global_batch.value_or(cfg.mesh.dp * r.micro_batch);
  if (global <= 0 && w.job.global_batch)
    r.batch_from = {w.file, "/global_batch", launch ? "" : " (--gbs overrides it)"};
  return r;
}

namespace {

void say_unread(const std::string& flag, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::string list;
  for (const auto& f : names) list += (list.empty() ? "" : ", ") + f;
  cli_err() << flag << ": not read (no effect on the simulation): " << list << "\n";
}

}  // namespace

std::string JobArgs::launch_flag() const {
  return from_megatron.empty() ? "--from-torchtitan" : "--from-megatron";
}

std::string JobArgs::launch_source() const {
  if (from_megatron.empty()) return from_torchtitan;
  // A script file, or the line itself (pasted in quotes, so it has spaces).
  const bool file = from_megatron.find(' ') == std::string::npos &&
                    std::filesystem::is_regular_file(from_megatron);
  return file ? from_megatron : "--from-megatron";
}

LaunchLayout JobArgs::launch_layout(const ModelSpec& model, std::int64_t world,
                                    bool reshard_after_forward) const {
  const std::string flag = launch_flag();
  if (world <= 0)
    throw Error("", flag,
                "needs the cluster (--topology): the launch configuration's data-parallel degree "
                "is what fills its GPUs");
  if (!from_megatron.empty()) {
    // Errors name the script file when the line came from one, else the flag.
    const std::string where = launch_source();
    const bool file = where != flag;
    const auto line =
        parse_megatron_line(file ? read_input_file(from_megatron) : from_megatron, where);
    if (const auto mismatch = megatron_architecture_mismatch(line, model))
      throw Error("", where, *mismatch + " (the line trains another model than --workload)");
    say_unread(flag, line.ignored);
    auto m = megatron_job(line, world, model.layers, where);
    m.config.reshard_after_forward = reshard_after_forward;  // no Megatron flag for it
    return m;
  }
  const auto t =
      parse_torchtitan_toml(read_input_file(from_torchtitan), world, model.layers, from_torchtitan);
  // A registered flavor must be the workload's model.
  const auto [name, flavor] = torchtitan_flavor(model);
  if (!t.flavor.empty() && !flavor.empty() && (t.model_name != name || t.flavor != flavor))
    throw Error("", flag,
                fmt::format("[model] {} {} is not the workload's model {} (torchtitan's {} {})",
                            t.model_name, t.flavor, model.name, name, flavor));
  say_unread(flag, t.ignored);
  return t.layout;
}

TrainingSetup training_setup(const JobArgs::Resolved& job) {
  TrainingSetup setup;
  setup.job = {job.seq,   job.global_batch,    job.micro_batch,
               job.dtype, job.flash_attention, job.pipeline_steps};
  setup.batch_from = job.batch_from;
  setup.config = job.config;
  setup.memory.recipe = stack_recipe(job.stack, job.dtype);
  setup.strategy.stack = job.stack;
  setup.strategy.tp_overlap = job.tp_overlap;
  setup.strategy.chunk_layers = job.chunk_layers;
  return setup;
}

}  // namespace meshsim::cli
