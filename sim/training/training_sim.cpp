#include "training/training_sim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/memory_budget.hpp"
#include "model/op_catalogue.hpp"
#include "model/param_count.hpp"
#include "network/flow_network.hpp"
#include "parallel/mesh_rules.hpp"
#include "strategy/layer_plan.hpp"
#include "strategy/pipeline_split.hpp"
#include "topology/topology_summary.hpp"
#include "training/training_split.hpp"

namespace meshsim {
namespace {

std::string report_group(GroupKind g) {
  switch (g) {
    case GroupKind::dp:
    case GroupKind::dp_cp:
    case GroupKind::edp:
    case GroupKind::shard:
    case GroupKind::replica:
      return "dp";
    default:
      return std::string(name_of(g));
  }
}

// A collective's HBM traffic as a fraction of the achievable HBM bandwidth: it reads what it
// sends and writes what it receives (`hbm_bytes_per_wire_byte` per byte sent) at the rate of the
// links it crosses, NVLink inside a node or the node's network bandwidth per GPU across nodes.
// Assumption (README): a collective sends at that link rate while it runs (a latency-bound one
// moves less, but briefly).
class HbmDemand {
 public:
  HbmDemand(const Topology& topo, const Placement& placement, double hbm_bytes_per_wire_byte,
            double achievable_Bps)
      : topo_(topo), placement_(placement) {
    const auto s = summarize(topo, false);
    nvlink_ = s.nvlink_Bps * hbm_bytes_per_wire_byte / achievable_Bps;
    network_ = s.network_Bps * hbm_bytes_per_wire_byte / achievable_Bps;
  }
  float operator()(std::int32_t rank, GroupKind g) {
    const auto key = std::make_pair(rank, g);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    const auto& gpus = topo_.gpus();
    const auto node_of = [&](std::int32_t r) {
      return topo_.vertex(gpus[static_cast<std::size_t>(placement_.gpu_of(r))]).node;
    };
    bool one_node = true;
    for (auto r : placement_.group(rank, g)) one_node = one_node && node_of(r) == node_of(rank);
    const auto d = static_cast<float>(one_node && nvlink_ > 0 ? nvlink_ : network_);
    return cache_.emplace(key, d).first->second;
  }

 private:
  const Topology& topo_;
  const Placement& placement_;
  double nvlink_ = 0, network_ = 0;
  std::map<std::pair<std::int32_t, GroupKind>, float> cache_;
};

}  // namespace

RankBreakdown breakdown_of(const Trace& trace, const ReplayResult& replay, std::int32_t rank,
                           const std::vector<std::uint32_t>& ops, Time step_end) {
  RankBreakdown b;
  b.rank = rank;
  // Boundaries of every op of this rank; +1 opens an interval, -1 closes it.
  // `op` −1: an interval in which a GPU op was ready but not yet launched by the host.
  struct Edge {
    Time t;
    int delta;
    std::int32_t op;
  };
  std::vector<Edge> edges;
  for (const auto i : ops) {
    const auto& info = trace.info[i];
    const auto& t = replay.ops[i];
    if (info.host || t.end <= t.start) continue;
    edges.push_back({t.start, +1, static_cast<std::int32_t>(i)});
    edges.push_back({t.end, -1, static_cast<std::int32_t>(i)});
    if (info.comm) b.comm_bytes[report_group(info.group)] += info.wire_bytes;
  }
  // Waiting for the host: from when an op's stream and other dependencies let it start to when
  // its launch op ended. `ops` are in insertion order, which is each stream's order.
  if (trace.launches) {
    std::map<std::uint32_t, Time> stream_free;  // by stream: when its last op ended
    for (const auto i : ops) {
      if (trace.info[i].host) continue;
      const Op op = trace.graph.op(OpId{i});
      Time& prev = stream_free[op.stream.value];
      Time ready = prev, launched = Time::zero();
      for (const auto d : op.deps) {
        Time& t = trace.info[d.value].host ? launched : ready;
        t = std::max(t, replay.ops[d.value].end);
      }
      const Time start = replay.ops[i].start;
      if (launched > ready && start > ready) {
        edges.push_back({ready, +1, -1});
        edges.push_back({std::min(launched, start), -1, -1});
      }
      prev = replay.ops[i].end;
    }
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& c) {
    return a.t != c.t ? a.t < c.t : a.delta < c.delta;
  });
  int computing = 0, unlaunched = 0;
  std::multiset<std::int32_t> active;  // comm ops in flight
  Time prev = Time::zero();
  auto account = [&](Time until) {
    const double dt = (until - prev).seconds();
    if (dt <= 0) return;
    if (computing > 0) {
      b.compute_s += dt;
    } else if (active.empty()) {
      (unlaunched > 0 ? b.host_wait_s : b.bubble_s) += dt;
    } else {
      // Exposed communication: split evenly among the groups (and op kinds) in flight.
      std::set<std::string> groups, kinds;
      for (auto op : active) {
        groups.insert(report_group(trace.info[static_cast<std::size_t>(op)].group));
        kinds.insert(std::string(trace.info[static_cast<std::size_t>(op)].kind));
      }
      for (const auto& g : groups) b.exposed_s[g] += dt / static_cast<double>(groups.size());
      for (const auto& k : kinds) b.exposed_by_op_s[k] += dt / static_cast<double>(kinds.size());
    }
  };
  for (const auto& e : edges) {
    account(e.t);
    prev = e.t;
    if (e.op < 0) {
      unlaunched += e.delta;
      continue;
    }
    const bool comm = trace.info[static_cast<std::size_t>(e.op)].comm;
    if (comm) {
      if (e.delta > 0)
        active.insert(e.op);
      else
        active.erase(active.find(e.op));
    } else {
      computing += e.delta;
    }
  }
  account(step_end);
  return b;
}

std::vector<MemoryBreakdown> setup_memory_per_stage(const ModelSpec& model,
                                                    const TrainingSetup& setup,
                                                    const std::vector<std::int64_t>& chunk_layers) {
  const auto& job = setup.job;
  MemoryOptions mo = setup.memory;
  mo.flash_attention = job.flash_attention;
  const TrainingMemoryJob mj{job.seq,   job.global_batch, job.micro_batch,
                             job.dtype, chunk_layers,     job.pipeline_steps};
  return training_memory_per_stage(model, mj, setup.config, mo);
}

std::function<bool(const std::vector<std::int64_t>&)> split_memory_check(const ModelSpec& model,
                                                                         const TrainingSetup& setup,
                                                                         double capacity_bytes) {
  return [&model, &setup, capacity_bytes](const std::vector<std::int64_t>& chunk_layers) {
    return worst_stage(setup_memory_per_stage(model, setup, chunk_layers)).total() <=
           capacity_bytes;
  };
}

TrainingResult simulate_training(const Topology& topo, const ModelSpec& model,
                                 const TrainingSetup& setup, CommContext* context) {
  const auto& cfg = setup.config;
  const auto& mesh = cfg.mesh;
  const auto& job = setup.job;
  const auto gpus = static_cast<std::int64_t>(topo.gpus().size());
  if (job.seq < 1) throw Error("", "--seq", "give the sequence length (or a job file with seq)");
  check_mesh(
      model, cfg,
      {job.seq, job.global_batch, job.micro_batch, true, setup.batch_from, job.pipeline_steps});
  if (mesh.world() != gpus)
    throw Error("", "--mesh",
                to_string(mesh) + " has " + std::to_string(mesh.world()) +
                    " ranks but the cluster has " + std::to_string(gpus) +
                    " GPUs (change the mesh or --nodes)");
  if (cfg.schedule.kind == ScheduleKind::interleaved && cfg.schedule.virtual_stages > 1 &&
      mesh.pp == 1)
    throw Error("", "--schedule", "interleaving needs pp > 1");

  TrainingResult r;
  r.gpus = gpus;
  r.stack = setup.strategy.stack.name;
  r.tp_overlap = tp_overlap_active(setup.strategy, cfg);
  if (cfg.mesh.cp > 1) r.cp_comm = name_of(setup.strategy.stack.cp_comm);
  const Placement placement(mesh, setup.rank_order);
  // A TP group that spans nodes puts its per-layer collectives on the network: allowed, flagged.
  if (mesh.tp > 1) {
    const auto g = placement.group(0, GroupKind::tp);
    std::set<std::int32_t> nodes;
    for (auto rank : g)
      nodes.insert(topo.vertex(topo.gpus()[static_cast<std::size_t>(placement.gpu_of(rank))]).node);
    if (nodes.size() > 1)
      r.notes.push_back("TP group spans " + std::to_string(nodes.size()) +
                        " nodes: its per-layer collectives cross the network");
  }
  for (auto& n : idle_module_notes(setup.strategy.stack, cfg.recompute_modules, model))
    r.notes.push_back(std::move(n));
  for (auto& n : unrun_notes(setup.strategy.stack, cfg.zero, schedule_family(cfg.schedule)))
    r.notes.push_back(std::move(n));
  if (job.pipeline_steps > 1) {
    const auto m = job.global_batch / (mesh.dp * job.micro_batch);
    r.notes.push_back(fmt::format(
        "the step's {} micro-batches run as {} pipeline schedules of {}, each with its own fill, "
        "drain and gradient sync",
        m, job.pipeline_steps, m / job.pipeline_steps));
  }
  const ComputeModel cm(topo.gpu, setup.profile);

  std::vector<std::int32_t> ranks;
  if (setup.full) {
    for (std::int64_t i = 0; i < gpus; ++i) ranks.push_back(static_cast<std::int32_t>(i));
  } else {
    for (std::int64_t s = 0; s < mesh.pp; ++s)
      ranks.push_back(static_cast<std::int32_t>(placement.rank_of({0, 0, 0, s})));
  }

  // The trace holds every op of every simulated rank: budgeted before it is built (issue 19: a
  // 16 M-layer model or 2^30 micro-batches allocated without bound).
  {
    const std::int64_t microbatches = microbatches_per_step(job, mesh);
    const std::int64_t stage_layers = (model.layers + mesh.pp - 1) / mesh.pp;
    // With the host's launches modelled every op gains a launch op on the host stream.
    const double per_pass = kTraceBytesPerLayerPass * (cm.host_per_kernel_s() > 0 ? 2.0 : 1.0);
    const double bytes = static_cast<double>(stage_layers * microbatches) *
                         static_cast<double>(ranks.size()) * per_pass;
    const double budget =
        setup.memory_budget_bytes > 0 ? setup.memory_budget_bytes : memory_budget_bytes();
    if (bytes > budget)
      throw Error(
          "", setup.full ? "--full" : "--gbs",
          fmt::format("the step's trace would need up to ~{:.0f} GB ({} simulated ranks × {} "
                      "layers × {} micro-batches at ~{:g} KB each); the limit here is {:.1f} GB",
                      bytes / 1e9, ranks.size(), stage_layers, microbatches, per_pass / 1e3,
                      budget / 1e9));
  }

  Simulator sim;
  std::optional<CommContext> own;
  if (!context) context = &own.emplace(topo);
  // Measured collective timings correct the modelled ones (folded replay; the full replay runs
  // the flows as modelled).
  context->calibration = setup.profile ? &setup.profile->links : nullptr;
  // Only the full replay runs flows during the step; folded prices come from the context.
  std::optional<FlowNetwork> net;
  std::unique_ptr<CommModel> comm;
  FoldedComm* folded = nullptr;
  if (setup.full) {
    comm = std::make_unique<FullComm>(topo, sim, net.emplace(topo, sim), *context);
  } else {
    auto f = std::make_unique<FoldedComm>(topo, placement, *context);
    folded = f.get();
    comm = std::move(f);
  }
  auto memory_of = [&](const std::vector<std::int64_t>& chunks) {
    return setup_memory_per_stage(model, setup, chunks);
  };
  // The split (training_split): given, tuned with the memory check, the stack's own, or balanced
  // by time with its even fall-back; the trace runs it as given.
  auto split = training_split(model, setup, cm, topo.gpu.hbm_bytes.as_double());
  StrategyOptions strategy = setup.strategy;
  strategy.chunk_layers = split.chunk_layers;
  r.trace = build_trace(model, job, cfg, placement, cm, *comm, strategy, ranks);
  r.memory_per_stage = memory_of(r.trace.chunk_layers);
  r.memory = worst_stage(r.memory_per_stage);
  r.chunk_layers = r.trace.chunk_layers;
  r.tuned_split_note = std::move(split.tuned_note);
  for (auto& n : split.notes) r.notes.push_back(std::move(n));
  r.notes.insert(r.notes.end(), r.trace.notes.begin(), r.trace.notes.end());
  r.microbatches = r.trace.microbatches;
  r.simulated_ranks = ranks.size();
  r.ops = r.trace.graph.op_count();
  std::optional<ReplayInterference> interference;
  if (const auto& st = setup.strategy.stack; st.interference.on) {
    auto& in = interference.emplace();
    const auto n = r.trace.info.size();
    in.slowdown.reserve(n);
    in.holds_sms.reserve(n);
    in.priced_beside.reserve(n);
    in.own_slowdown.reserve(n);
    in.both_slowdown.reserve(n);
    in.hbm_fraction.reserve(n);
    in.hbm_demand.reserve(n);
    in.late_start = true;
    HbmDemand demand(topo, placement, st.interference.hbm_bytes_per_wire_byte,
                     hbm_achievable_Bps(cm));
    for (const auto& info : r.trace.info) {
      in.slowdown.push_back(info.slowdown);
      in.holds_sms.push_back(info.comm && info.holds_sms);
      in.priced_beside.push_back(info.comm ? -1 : info.priced_beside);
      in.own_slowdown.push_back(info.own_slowdown);
      in.both_slowdown.push_back(info.both_slowdown);
      in.hbm_fraction.push_back(info.comm ? 0.0F : info.hbm_fraction);
      in.hbm_demand.push_back(!info.comm            ? 0.0F
                              : info.wire_bytes > 0 ? demand(info.rank, info.group)
                                                    : info.hbm_demand);
    }
    // The full replay's collectives are flows: their GPUs' HBM share scales them.
    if (net) {
      net->enable_gpu_rate_scales(topo);
      in.on_hbm = [&net, &topo, &placement](std::int32_t rank, double d) {
        net->set_gpu_rate_scale(topo.gpus()[static_cast<std::size_t>(placement.gpu_of(rank))],
                                1.0 / std::max(1.0, d));
      };
    }
  }
  // Folded collectives that overlap on a rank share links as the full replay's flows do (a
  // property of the network, so on in every stack).
  if (folded) {
    auto& in = interference ? *interference : interference.emplace();
    in.share_key.reserve(r.trace.info.size());
    for (std::uint32_t i = 0; i < r.trace.info.size(); ++i)
      in.share_key.push_back(r.trace.info[i].comm ? folded->collective_of(OpId{i}) : -1);
    in.share = [folded](std::int32_t self, std::vector<std::int32_t> others) {
      return folded->share(self, std::move(others));
    };
  }
  Replay<Simulator> replay(r.trace.graph, sim, nullptr, interference ? &*interference : nullptr);
  if (setup.progress) replay.on_progress(setup.progress, 4096);
  r.replay = replay.run();

  const Time step = r.replay.makespan;
  r.step_time_s = step.seconds() + setup.input_stall_s;
  double all_flops = 0, base_flops = 0;
  for (const auto& info : r.trace.info) {
    all_flops += info.model_flops;
    if (!info.recompute) base_flops += info.model_flops;
  }
  // Each rank's ops, gathered in one pass (a full replay has millions of ops).
  std::map<std::int32_t, std::vector<std::uint32_t>> ops_of;
  for (std::uint32_t i = 0; i < r.trace.info.size(); ++i) ops_of[r.trace.info[i].rank].push_back(i);
  for (auto rank : ranks) {
    auto b = breakdown_of(r.trace, r.replay, rank, ops_of[rank], step);
    b.stage = placement.coord_of(rank).pp;
    // Compute time lost to interference: how much longer the compute ops ran than alone.
    for (const auto i : ops_of[rank]) {
      const auto& info = r.trace.info[i];
      if (info.comm)
        for (const auto* wait : {&r.replay.hbm_wait_ps, &r.replay.sm_wait_ps})
          if (i < wait->size()) b.comm_interference_s += static_cast<double>((*wait)[i]) * 1e-12;
      if (info.comm || (info.slowdown <= 1.0F && info.hbm_fraction <= 0.0F)) continue;
      const auto& t = r.replay.ops[i];
      const Time nominal = r.trace.graph.op(OpId{i}).duration;
      if (t.end - t.start > nominal) b.interference_s += (t.end - t.start - nominal).seconds();
    }
    r.ranks.push_back(std::move(b));
  }
  const double n = static_cast<double>(r.ranks.size());
  for (const auto& b : r.ranks) {
    r.compute_s += b.compute_s / n;
    r.bubble_s += b.bubble_s / n;
    r.host_wait_s += b.host_wait_s / n;
    r.interference_s += b.interference_s / n;
    r.comm_interference_s += b.comm_interference_s / n;
    for (const auto& [k, v] : b.exposed_s) r.exposed_comm_s[k] += v / n;
    for (const auto& [k, v] : b.exposed_by_op_s) r.exposed_comm_by_op_s[k] += v / n;
    for (const auto& [k, v] : b.comm_bytes) r.comm_bytes_per_gpu[k] += v / n;
  }
  if (setup.input_stall_s > 0) r.exposed_comm_by_op_s["input_stall"] = setup.input_stall_s;
  for (const char* g : {"tp", "dp", "pp", "cp", "ep"}) {
    r.exposed_comm_s.try_emplace(g, 0.0);
    r.comm_bytes_per_gpu.try_emplace(g, 0.0);
  }
  r.bubble_fraction = r.step_time_s > 0 ? r.bubble_s / r.step_time_s : 0;
  const double tokens = static_cast<double>(job.global_batch * job.seq);
  r.tokens_per_s = tokens / r.step_time_s;
  r.tokens_per_s_per_gpu = r.tokens_per_s / static_cast<double>(gpus);
  r.model_flops_per_step = training_flops_per_token(model, job.seq) * tokens;
  r.model_tflops_per_gpu =
      r.model_flops_per_step / r.step_time_s / static_cast<double>(gpus) / 1e12;
  r.mfu = r.model_tflops_per_gpu * 1e12 / cm.peak_flops(job.dtype);
  r.hfu = base_flops > 0 ? r.mfu * all_flops / base_flops : r.mfu;

  const auto params = count_params(model).total;
  const auto& rec = setup.memory.recipe;
  r.reliability =
      project_reliability(params * (rec.weight_bytes + rec.master_bytes + rec.optimizer_bytes),
                          gpus, static_cast<std::int64_t>(topo.node_count()), setup.reliability);
  return r;
}

}  // namespace meshsim
