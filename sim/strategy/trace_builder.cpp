#include "strategy/trace_builder.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "engine/longest_chain.hpp"
#include "model/moe_routing.hpp"
#include "model/op_catalogue.hpp"
#include "strategy/layer_plan.hpp"
#include "strategy/pipeline_schedule.hpp"
#include "strategy/pipeline_split.hpp"
#include "strategy/ring_attention.hpp"
#include "topology/topology.hpp"

namespace meshsim {

std::int64_t microbatches_per_step(const TrainingJob& job, const Mesh& mesh) {
  return std::max<std::int64_t>(job.global_batch / (mesh.dp * job.micro_batch), 1);
}

bool tp_overlap_active(const StrategyOptions& options, const ParallelConfig& config) {
  const auto& ov = options.stack.tp_overlap;
  return config.sp && config.mesh.tp > 1 && ov.method != TpOverlapMethod::none &&
         options.tp_overlap.value_or(ov.on);
}

double stack_bucket_bytes(const Stack& stack, std::int64_t dp, DType dtype) {
  const auto& d = stack.data_parallel;
  return std::max(d.bucket_min_params, d.bucket_params_per_rank * static_cast<double>(dp)) *
         stack.grad_reduce_bytes(dtype);
}

namespace {

std::string_view op_name(CollectiveOp op) {
  return name_of(op);
}

// How many times longer an op priced `base` runs when priced `slowed` (TraceOpInfo's slowdown
// factors): 1 unless it is slower.
float slowdown_factor(Time base, Time slowed) {
  return base > Time::zero() && slowed > base
             ? static_cast<float>(slowed.seconds() / base.seconds())
             : 1.0F;
}

// Per-GPU bytes sent for a collective of size S on n ranks (ring-equivalent volume).
double wire_bytes(CollectiveOp op, double s, std::size_t n) {
  if (n < 2 && op != CollectiveOp::send_recv) return 0;
  const double f = static_cast<double>(n - 1) / static_cast<double>(std::max<std::size_t>(n, 1));
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2 * f * s;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return f * s;
    default:
      return s;
  }
}

struct Costs {
  LayerPlan dense, moe;
  EndCost embedding, head;
  double tp_bytes = 0;       // a TP collective's buffer: T·h in 16 bits
  double pp_bytes = 0;       // activation sent between stages
  double kv_step_bytes = 0;  // one CP ring step: this rank's K and V
  double a2a_bytes = 0;      // EP dispatch buffer per rank
  // Ring attention's cp steps against the one balanced kernel the layer plan priced
  // (strategy/ring_attention.hpp), forward and backward.
  double ring_forward = 1, ring_backward = 1;
};

// The bound's comm model: collectives go into the graph with no duration and are priced (by the
// folded model, as the replay prices them) only where a chain needs them: a layer's FSDP gathers,
// which run before its first kernel, never are.
class DeferredComm : public CommModel {
 public:
  // `unloaded`: the data-parallel groups' collectives at their unloaded lower bounds.
  DeferredComm(FoldedComm& priced, bool unloaded) : priced_(priced), unloaded_(unloaded) {}
  OpId add(OpGraph& g, StreamId s, std::string_view name, const CommRequest& r,
           std::span<const OpId> deps) override {
    const OpId id = g.add_op(s, name, Time::zero(), deps);
    if (requests_.size() <= id.value) requests_.resize(id.value + 1);
    requests_[id.value] = r;
    return id;
  }
  const Topology* topology() const override { return priced_.topology(); }
  // Each of `ops`' duration as the replay would start it: a collective's folded price.
  std::vector<Time> durations(const OpGraph& g, const std::vector<OpId>& ops) {
    std::vector<Time> d(g.op_count());
    for (std::uint32_t i = 0; i < d.size(); ++i) d[i] = g.op(OpId{i}).duration;
    for (auto id : ops)
      if (id.value < requests_.size() && requests_[id.value]) {
        const auto& r = *requests_[id.value];
        d[id.value] =
            unloaded_ && data_parallel_kind(r.kind) ? priced_.unloaded_price(r) : priced_.price(r);
      }
    return d;
  }
  void clear() { requests_.clear(); }

 private:
  static bool data_parallel_kind(GroupKind k) {
    return k == GroupKind::dp || k == GroupKind::dp_cp || k == GroupKind::edp ||
           k == GroupKind::shard || k == GroupKind::replica;
  }
  FoldedComm& priced_;
  bool unloaded_ = false;
  std::vector<std::optional<CommRequest>> requests_;  // by OpId
};

// A TP GEMM's kernel of `pass` (0 forward, 1 dgrad, 2 wgrad).
const Kernel& pass_kernel(const TpGemm& g, int pass) {
  return pass == 0 ? g.forward : pass == 1 ? g.backward_input : g.backward_weight;
}

// Calls f(kernel) for each of `gemms` in `role` that `pass` runs.
template <class F>
void for_each_gemm(const std::vector<TpGemm>& gemms, TpRole role, int pass, F&& f) {
  for (const auto& g : gemms)
    if (g.role == role)
      if (const Kernel& k = pass_kernel(g, pass); !k.empty()) f(k);
}

class Builder {
 public:
  Builder(const ModelSpec& model, const TrainingJob& job, const ParallelConfig& config,
          const Placement& placement, const ComputeModel& cm, CommModel& comm,
          const StrategyOptions& options)
      : m_(model),
        job_(job),
        cfg_(config),
        pl_(placement),
        cm_(cm),
        comm_(comm),
        opt_(options),
        mesh_(config.mesh) {}

  Trace build(const std::vector<std::int32_t>& ranks);
  // The lower bound of step_time_lower_bound (trace_builder.hpp), from the same costs and split.
  double lower_bound_s(const std::vector<std::int64_t>& chunk_layers);
  // The optimizer step of pipeline stage `stage`: Adam over its chunks' local parameters.
  SegmentCost optimizer_cost(std::int64_t stage) const;
  std::vector<std::int64_t> split() const;
  // The split build() runs, with the costs it weighs (trace_chunk_layers).
  std::vector<std::int64_t> split_entry() {
    prepare();
    return split();
  }
  // `chains`: the layers' passes are priced as chains with their collectives (layer_chains), not
  // as compute alone; the builder's comm model must be it.
  // `full`: every stage's chains, and the data-parallel streams' collectives count too (ZeRO-3's
  // all-gathers, the gradient reductions and the last of them before the optimizer).
  double bound_entry(DeferredComm* chains, bool full);

 private:
  struct RankState {
    std::int32_t rank = 0;
    RankCoord coord;
    StreamId compute, tp, cp, dp, dpg, ep, pp;
    // The host thread that launches this rank's kernels, when the profile measures what a launch
    // costs the host (ComputeModel::host_per_kernel_s); the search's bounds leave it out.
    std::optional<StreamId> host;
    // Inside a CUDA graph the stack captures (Stack::cuda_graphs), and whether its one launch
    // has been issued.
    bool capturing = false, graph_launched = false;
    std::vector<PipelineAction> actions;
    std::size_t next = 0;
    std::vector<OpId> pending;
    std::optional<OpId> last_compute, last_dp;
    double slow = 1.0;
    std::map<std::int64_t, OpId> param_gather;  // ZeRO-1/2: per layer, at step start
    // (chunk, micro-batch) of each chunk's last backward in each pipeline step.
    std::set<std::pair<std::int64_t, std::int64_t>> step_last_backward;
    std::set<std::int64_t> resident;  // layers whose gathered weights stay (step_gather_)
    std::vector<OpId> layer_done;     // ZeRO-3 prefetch: last op of each layer in this pass
    std::uint64_t slot = 0;
  };

  // Which GEMMs of a segment pipeline with a TP collective: `ag_role` GEMMs consume an
  // all-gather before them, `rs_role` GEMMs produce a reduce-scatter after them, `bulk_wgrad`:
  // the column-parallel wgrad runs beside the reduce-scatter of the dgrad output.
  struct Overlap {
    int pass = 0;  // 0 forward, 1 dgrad
    std::optional<TpRole> ag_role, rs_role;
    bool bulk_wgrad = false;
    // The column-parallel dgrad runs beside the bulk all-gather of its saved input shard (SP's
    // re-gather, TE qkv_dgrad / fc1_dgrad), which the wgrad then uses.
    bool bulk_dgrad_ag = false;
  };
  void compute_costs();
  // What build() and the bound set before anything else: the flags and the layer costs.
  void prepare();
  Time gemm_time(const Kernel& k, std::int64_t chunks, const ComputeModel* fewer_sms) const;
  Time gemms_time(const std::vector<TpGemm>& gemms, TpRole role, int pass, std::int64_t chunks,
                  const ComputeModel* fewer_sms) const;
  OpId fixed_compute(RankState& rs, const std::string& name, Time t, double kernels);
  // The HBM time of `gemms` in `role` that `pass` runs, each GEMM in `chunks` along M (each
  // chunk reads the whole weight again), at the achievable bandwidth (SegmentCost::hbm_s).
  double gemms_hbm_s(const std::vector<TpGemm>& gemms, TpRole role, int pass,
                     std::int64_t chunks) const;
  // One chunk GEMM of TP overlap: `gemms` in `role` cut in `chunks` along M, priced on the SMs
  // its own collective leaves (`own_fewer_sms`, null: every SM); `interfered` beside another
  // collective's NCCL kernels as well. Its op is priced beside the rank's TP stream (compute's
  // `beside`): its own transfers there are not that other collective.
  SegmentCost overlap_chunk(const std::vector<TpGemm>& gemms, TpRole role, int pass,
                            std::int64_t chunks, const ComputeModel* own_fewer_sms) const;
  // Kernels of `gemms` in `role` that `pass` runs (one launch each).
  static double gemms_kernels(const std::vector<TpGemm>& gemms, TpRole role, int pass);
  // The host's launch of `kernels` kernels, before the op that runs them: an op on the rank's
  // host stream that the op then depends on (added to `deps`); nothing without a host stream.
  void issue(RankState& rs, double kernels, std::vector<OpId>& deps, std::string_view name,
             StreamId stream);
  // Whether an op on `stream` runs in the graph being captured: every stream for a whole-step
  // graph, the compute and model-parallel streams for a layer's.
  bool captured(const RankState& rs, StreamId stream) const;
  // A layer pass captured as one graph when the stack captures layers (nested passes, such as a
  // checkpointed layer's recomputed forward in its backward, stay in the outer graph).
  struct LayerGraph {
    RankState& rs;
    bool was;
    LayerGraph(RankState& r, bool on) : rs(r), was(r.capturing) {
      if (on && !was) {
        rs.capturing = true;
        rs.graph_launched = false;
      }
    }
    ~LayerGraph() { rs.capturing = was; }
    LayerGraph(const LayerGraph&) = delete;
    LayerGraph& operator=(const LayerGraph&) = delete;
  };
  // The column-parallel GEMMs of `pass` (1 dgrad, 2 wgrad) beside TE's bulk collective.
  OpId bulk_gemm(RankState& rs, const std::string& name, const std::vector<TpGemm>& gemms,
                 int pass);
  void overlapped_segment(RankState& rs, const std::string& name, const SegmentCost& seg,
                          const std::vector<TpGemm>& gemms, const Overlap& o, bool recompute,
                          std::uint64_t inst);
  // Emits the rank's next action (a merged forward with the backward after it), once its inputs
  // have been sent; returns how many actions it took (0: not yet).
  std::size_t emit(RankState& rs);
  // A pipeline send: (receiving rank, micro-batch, its chunk, 0 forward / 1 backward).
  using SendKey = std::tuple<std::int32_t, std::int64_t, std::int64_t, int>;
  // The send a pass waits for; none for the model's first chunk forward, its last chunk
  // backward, a weight pass, or a neighbouring chunk on the same rank.
  std::optional<SendKey> input_key(const RankState& rs, const PipelineAction& a) const;
  bool input_ready(const RankState& rs, const PipelineAction& a) const;
  void receive(RankState& rs, const PipelineAction& a);  // the pass waits for its input's send
  void send(RankState& rs, const PipelineAction& a);     // the pass's output to the next chunk
  // emit()'s parts, so a merged pair can interleave its two passes' layers.
  struct BackwardPass {
    std::vector<std::pair<std::int64_t, std::int64_t>> buckets;  // grad_buckets
    std::size_t next = 0;
    bool last = false;  // the chunk's last backward of its pipeline step
  };
  void forward_begin(RankState& rs, const PipelineAction& a);
  void forward_end(RankState& rs, const PipelineAction& a);
  BackwardPass backward_begin(RankState& rs, const PipelineAction& a);
  // The gradient reduction whose bucket ends at layer `l`, after its backward.
  void backward_reduce(RankState& rs, const PipelineAction& a, BackwardPass& b, std::int64_t l);
  void backward_end(RankState& rs, const PipelineAction& a);
  struct Chain {
    std::vector<OpId> pending;
    std::optional<OpId> last_compute;
    std::vector<OpId> layer_done;
  };
  bool emit_merged(RankState& rs, const PipelineAction& f, const PipelineAction& b);
  // `beside`: the rank's communication stream (StreamId value) whose SM-holding ops are already
  // in the op's price (TraceOpInfo::priced_beside); -1: none.
  OpId compute(RankState& rs, const std::string& name, const SegmentCost& c, bool recompute,
               std::int32_t beside = -1);
  OpId comm(RankState& rs, StreamId s, const std::string& name, GroupKind g, CollectiveOp op,
            std::vector<std::int32_t> ranks, double bytes, std::vector<OpId> deps,
            std::uint64_t instance, std::optional<CollectiveAlgo> algo = std::nullopt,
            double fraction = 1.0, bool sender_only = false, double network_share = 1.0);
  void tp(RankState& rs, CollectiveOp op, const std::string& name, std::uint64_t inst,
          std::optional<double> bytes = std::nullopt);
  // A TP all-gather of a TE linear's input (the normed activation, its re-gather in backward,
  // an output gradient): 1-byte elements in FP8 runs on a stack that quantizes before gathering
  // (Stack::fp8_tp_all_gathers); MoE layers' dispatch keeps 16 bits.
  double gather_bytes(bool moe = false) const {
    return job_.dtype == DType::fp8 && opt_.stack.fp8_tp_all_gathers && !moe ? costs_.tp_bytes / 2
                                                                             : costs_.tp_bytes;
  }
  // The backward of a segment ending (in backward order) with column-parallel GEMMs and their
  // input-gradient TP reduction, as the stack runs it (Stack::tp_backward).
  void column_backward(RankState& rs, const std::string& name, const SegmentCost& seg,
                       const std::vector<TpGemm>& gemms, bool split_w, const std::string& reduce,
                       std::uint64_t inst);
  // Kernels of `gemms` priced alone and with a plain NCCL collective's SMs taken.
  SegmentCost gemm_piece(const std::vector<TpGemm>& gemms, TpRole role, int pass) const;
  // `seg` without the time and kernels of `used` (its FLOPs kept: the pieces carry none).
  static SegmentCost without(const SegmentCost& seg, Time used, double used_kernels,
                             double used_hbm_s);
  void ep(RankState& rs, const std::string& name, std::uint64_t inst);
  // What DeepEP sends between nodes for this EP group, of a plain all-to-all's bytes (1 with the
  // plain dispatcher, on one node, or where nothing is priced); per group's first rank.
  double ep_network_share(const std::vector<std::int32_t>& group);
  std::map<std::int32_t, double> ep_shares_;
  // A layer's pass, or one of its kLayerPieces pieces (cut where an MoE layer's all-to-alls
  // are: up to the forward's dispatch or the backward's combine, the MLP up to the next one, the
  // rest); -1: the whole pass. A merged pair interleaves the pieces of its two passes.
  static constexpr int kLayerPieces = 3;
  // A selective policy's ops re-run before a layer's backward, with the collectives its
  // checkpoints re-run (LayerPlan::recompute_tp_gemms, recompute_dispatch, recompute_combine).
  void recompute_selective(RankState& rs, const std::string& name, const LayerPlan& p,
                           std::uint64_t inst);
  void forward_layer(RankState& rs, std::int64_t mb, std::int64_t layer, bool recompute,
                     int piece = -1);
  void backward_layer(RankState& rs, std::int64_t mb, std::int64_t layer, bool split_w,
                      int piece = -1);
  void attention(RankState& rs, const std::string& name, const SegmentCost& seg, bool backward,
                 bool recompute, std::uint64_t inst);
  void gather_layer(RankState& rs, std::int64_t layer, std::uint64_t inst);
  // An FSDP2 copy kernel of `bytes` (read + written) on a collective's stream, before it.
  OpId copy_kernel(RankState& rs, StreamId s, const std::string& name, GroupKind g, double bytes,
                   std::vector<OpId> deps);
  // The group dense ZeRO/FSDP state is sharded over: all DP × CP ranks, or an HSDP shard group.
  GroupKind shard_kind() const { return mesh_.fsdp > 0 ? GroupKind::shard : GroupKind::dp_cp; }
  void reduce_grads(RankState& rs, std::int64_t chunk, std::int64_t first, std::int64_t count,
                    bool last_mb, OpId after, std::uint64_t inst, bool with_ends);
  // The gradient reductions of chunk `g`'s backward in issue order, as {first layer, layers}:
  // the whole chunk after its weight pass on zero-bubble schedules, each layer under ZeRO-3,
  // otherwise buckets filled in backward order (last layer first) and reduced once full.
  std::vector<std::pair<std::int64_t, std::int64_t>> grad_buckets(std::int64_t g) const;
  // The bound's view of chunk `g`'s gradient reductions on pipeline stage `stage`'s
  // representative, at their prices on its data-parallel stream: all of them (one micro-batch's)
  // and the last one, which the optimizer waits for.
  struct Reductions {
    Time all, last;
  };
  Reductions reductions(std::int64_t stage, std::int64_t g);
  RankState rank_state(std::int32_t rank, bool host_issue = false);
  // The bound's view of one layer's pass on pipeline stage `stage`'s representative: the longest
  // chain of its ops at their nominal durations (engine/longest_chain.hpp), forward and backward
  // (split into input and weight gradients on zero-bubble schedules). Cached per stage and the
  // layer's kind (dense or MoE, checkpointed, first or last: all a pass depends on).
  struct LayerChains {
    Time forward, backward;
    // ZeRO-3's parameter all-gathers of both passes at their prices (the dp_gather stream).
    Time gathers;
  };
  const LayerChains& layer_chains(std::int64_t stage, std::int64_t layer);
  std::uint64_t instance(std::int64_t mb, std::int64_t layer, int pass) const {
    return hash_combine(
        hash_combine(static_cast<std::uint64_t>(mb), static_cast<std::uint64_t>(layer)),
        static_cast<std::uint64_t>(pass));
  }
  const LayerPlan& plan(std::int64_t layer) const {
    return m_.is_moe_layer(layer) ? costs_.moe : costs_.dense;
  }
  std::int64_t chunks() const { return static_cast<std::int64_t>(chunk_layers_.size()); }
  std::int64_t first_layer(std::int64_t g) const {
    return chunk_first_[static_cast<std::size_t>(g)];
  }
  // Whether full recompute re-runs `layer` (ParallelConfig::checkpointed, by its place in its
  // model chunk).
  bool checkpointed(std::int64_t layer) const {
    const auto next = std::upper_bound(chunk_first_.begin(), chunk_first_.end(), layer);
    return cfg_.checkpointed(layer - *std::prev(next));
  }
  std::int64_t rank_at_stage(const RankState& rs, std::int64_t stage) const {
    RankCoord c = rs.coord;
    c.pp = stage;
    return pl_.rank_of(c);
  }
  double end_params(std::int64_t g) const {
    double p = 0;
    if (g == 0) p += costs_.embedding.params;
    if (g == chunks() - 1) p += costs_.head.params;
    return p;
  }

  const ModelSpec& m_;
  const TrainingJob& job_;
  const ParallelConfig& cfg_;
  const Placement& pl_;
  const ComputeModel& cm_;
  CommModel& comm_;
  const StrategyOptions& opt_;
  Mesh mesh_;
  Costs costs_;
  std::vector<std::int64_t> chunk_layers_, chunk_first_;
  std::int64_t microbatches_ = 1;
  bool sp_ = false, zb_ = false, overlap_ = false;
  // Sharded data parallelism that syncs once per pipeline step (ShardedWithPp::once_per_step):
  // a chunk's gradients reduced after its last backward; with ZeRO-3 and no reshard after
  // forward, a layer's weights gathered at its first forward only.
  bool step_sync_ = false, step_gather_ = false;
  double grad_bytes_ = 2, bucket_bytes_ = 0;
  // The GPU with a collective's SMs taken: a plain NCCL collective (interference), userbuffers'
  // pipelined reduce-scatter, the bulk overlaps, and each of the last two with a plain NCCL
  // collective as well (a userbuffers chunk GEMM keeps the plan made for the SMs its reduce-
  // scatter leaves; a bulk-overlap GEMM was planned for every SM).
  std::optional<ComputeModel> cm_nccl_, cm_rs_, cm_bulk_, cm_rs_nccl_, cm_bulk_nccl_;
  Trace trace_;
  std::map<SendKey, OpId> sends_;
  // A rank's group of a kind (Placement::group), worked out once: every layer and micro-batch
  // of a rank asks for the same few.
  const std::vector<std::int32_t>& group_of(std::int64_t rank, GroupKind kind) {
    const auto key = std::make_pair(rank, kind);
    if (const auto it = groups_.find(key); it != groups_.end()) return it->second;
    return groups_.emplace(key, pl_.group(rank, kind)).first->second;
  }
  std::map<std::pair<std::int64_t, GroupKind>, std::vector<std::int32_t>> groups_;
  DeferredComm* chains_ = nullptr;  // the bound prices layer passes as chains through it
  // The full bound (bound_entry with data_parallel): every stage's chains and the data-parallel
  // streams.
  bool full_bound_ = false;
  std::map<std::tuple<std::int64_t, bool, bool, bool, bool>, LayerChains> chain_cache_;
};

void Builder::compute_costs() {
  const Sharding sh{mesh_.tp, cfg_.sp, mesh_.cp, mesh_.ep};
  const auto& st = opt_.stack;
  const auto& gpu = cm_.gpu();
  // A plain NCCL collective and TE's bulk overlap take SMs from GEMMs launched for the whole
  // GPU (unless a calibration profile measured otherwise); TE's pipelined reduce-scatter
  // launches its GEMM chunks for the SMs it leaves.
  const auto& profile = cm_.profile();
  const bool for_all = !profile || profile->gemm_launched_for_all_sms.value_or(true);
  if (st.interference.on && st.interference.nccl_sms > 0)
    cm_nccl_.emplace(gpu, profile, SmsTaken{st.interference.nccl_sms, for_all});
  const auto& ov = st.tp_overlap;
  overlap_ = tp_overlap_active(opt_, cfg_);
  if (overlap_) {
    if (ov.rs_sms > 0) cm_rs_.emplace(gpu, cm_.profile(), SmsTaken{ov.rs_sms, false});
    if (ov.rs_sms > 0 && cm_nccl_)
      cm_rs_nccl_.emplace(gpu, cm_.profile(),
                          SmsTaken{ov.rs_sms + st.interference.nccl_sms, for_all, ov.rs_sms});
    if (ov.bulk_sms > 0) cm_bulk_.emplace(gpu, cm_.profile(), SmsTaken{ov.bulk_sms, for_all});
    if (ov.bulk_sms > 0 && cm_nccl_)
      cm_bulk_nccl_.emplace(gpu, cm_.profile(),
                            SmsTaken{ov.bulk_sms + st.interference.nccl_sms, for_all});
  }
  grad_bytes_ = st.grad_reduce_bytes(job_.dtype);
  step_sync_ = syncs_once_per_step(st.data_parallel.sharded_with_pp, cfg_.zero, mesh_.pp);
  step_gather_ = step_sync_ && cfg_.zero >= 3 && !cfg_.reshard_after_forward;
  bucket_bytes_ = opt_.bucket_bytes.value_or(stack_bucket_bytes(st, mesh_.dp, job_.dtype));
  const PlanPricing pricing{
      cm_,      st,  cm_nccl_ ? &*cm_nccl_ : nullptr,          cfg_.recompute_units,
      mesh_.tp, sp_, cfg_.zero >= 3 && mesh_.shard_group() > 1};
  const LayerShape shape{.micro_batch = job_.micro_batch,
                         .seq = job_.seq,
                         .dtype = job_.dtype,
                         .flash_attention = job_.flash_attention,
                         .fp8_routed_experts = st.fp8_routed_experts};
  const double slowdown = 1.0 + opt_.expert_imbalance;
  const bool shared = m_.moe && m_.moe->shared_experts > 0;
  const auto ring_scales_of = [&](const std::vector<OpSpec>& ops) {
    if (mesh_.cp == 1 || opt_.stack.cp_comm != CpComm::ring) return;
    for (const auto& op : ops)
      if (op.name == "attention_core") {
        costs_.ring_forward = ring_attention_scale(cm_, op.forward, mesh_.cp);
        costs_.ring_backward = ring_attention_scale(cm_, op.backward_input, mesh_.cp);
      }
  };
  if (!m_.is_moe_layer(0)) {  // dense layers (all, or DeepSeek's first, or Llama 4's between)
    const auto ops = layer_ops(m_, 0, shape, sh);
    ring_scales_of(ops);
    costs_.dense = plan_layer(ops, pricing, false, false, 1.0);
  }
  if (m_.moe) {
    std::int64_t last_moe = m_.layers - 1;
    while (last_moe > 0 && !m_.is_moe_layer(last_moe)) --last_moe;
    const auto ops = layer_ops(m_, last_moe, shape, sh);
    ring_scales_of(ops);
    costs_.moe = plan_layer(ops, pricing, true, shared, slowdown);
  }
  costs_.embedding = plan_end(embedding_ops(m_, shape, sh), pricing);
  costs_.head = plan_end(head_ops(m_, shape, sh), pricing);
  const double tokens =
      static_cast<double>(job_.micro_batch * job_.seq) / static_cast<double>(mesh_.cp);
  const double h = static_cast<double>(m_.hidden);
  costs_.tp_bytes = tokens * h * 2;
  costs_.pp_bytes = tokens * h * 2 / (cfg_.sp ? static_cast<double>(mesh_.tp) : 1.0);
  const std::int64_t kv_rank = m_.kv_heads >= mesh_.tp ? m_.kv_heads / mesh_.tp : 1;
  // What the attention kernel consumes travels around the ring. MLA's core attention
  // (Megatron-Core multi_latent_attention.py into TEDotProductAttention, whose CP ring moves
  // the K and V it is given) gets every head's up-projected K (nope + rope dims) and V, not
  // the compressed latent a serving engine caches.
  const double kv_dim =
      m_.mla ? static_cast<double>(
                   (m_.heads / mesh_.tp) *
                   (m_.mla->qk_nope_head_dim + m_.mla->qk_rope_head_dim + m_.mla->v_head_dim))
             : static_cast<double>(kv_rank * m_.head_dim) * 2;
  costs_.kv_step_bytes = tokens * kv_dim * 2;
  if (m_.moe)
    costs_.a2a_bytes =
        tokens / static_cast<double>(mesh_.tp) * static_cast<double>(m_.moe->top_k) * h * 2;
}

OpId Builder::compute(RankState& rs, const std::string& name, const SegmentCost& c, bool recompute,
                      std::int32_t beside) {
  // In a CUDA graph the kernels follow one another with the graph's gap, not the eager one.
  const double graph_saves =
      captured(rs, rs.compute) ? c.kernels * (cm_.kernel_gap_s() - cm_.graph_kernel_gap_s()) : 0;
  const Time t = Time::from_seconds_ceil(std::max(0.0, c.time.seconds() - graph_saves) * rs.slow);
  issue(rs, c.kernels, rs.pending, name, rs.compute);
  const OpId id = trace_.graph.add_op(rs.compute, name, t, std::move(rs.pending));
  rs.pending.clear();
  TraceOpInfo info;
  info.rank = rs.rank;
  info.model_flops = c.model_flops;
  info.hardware_flops = c.hardware_flops;
  info.recompute = recompute;
  info.slowdown = slowdown_factor(c.time, c.interfered);
  info.priced_beside = beside;
  if (c.time > Time::zero())
    info.hbm_fraction = static_cast<float>(std::min(1.0, c.hbm_s / c.time.seconds()));
  trace_.info.push_back(info);
  rs.last_compute = id;
  return id;
}

namespace {

// One of `chunks` pieces of a GEMM cut along M (TP overlap's chunks).
Kernel chunk_of(const Kernel& k, std::int64_t chunks) {
  if (chunks <= 1) return k;
  return gemm_kernel({(k.gemm.m + chunks - 1) / chunks, k.gemm.n, k.gemm.k, k.gemm.batch}, k.dtype);
}

}  // namespace

Time Builder::gemm_time(const Kernel& k, std::int64_t chunks, const ComputeModel* fewer_sms) const {
  const Kernel c = chunk_of(k, chunks);
  double t = cm_.seconds(c);
  if (fewer_sms) {
    const double alone = cm_.model_seconds(c);
    if (alone > 0) t *= std::max(1.0, fewer_sms->model_seconds(c) / alone);
  }
  return Time::from_seconds_ceil(t + cm_.kernel_gap_s());
}

Time Builder::gemms_time(const std::vector<TpGemm>& gemms, TpRole role, int pass,
                         std::int64_t chunks, const ComputeModel* fewer_sms) const {
  Time t;
  for_each_gemm(gemms, role, pass, [&](const Kernel& k) { t += gemm_time(k, chunks, fewer_sms); });
  return t;
}

double Builder::gemms_hbm_s(const std::vector<TpGemm>& gemms, TpRole role, int pass,
                            std::int64_t chunks) const {
  double bytes = 0;
  for_each_gemm(gemms, role, pass, [&](const Kernel& k) { bytes += chunk_of(k, chunks).bytes; });
  return bytes / hbm_achievable_Bps(cm_);
}

OpId Builder::fixed_compute(RankState& rs, const std::string& name, Time t, double kernels) {
  SegmentCost c;
  c.time = t;
  c.interfered = t;  // priced with the SMs its own collective takes
  c.kernels = kernels;
  return compute(rs, name, c, false);
}

SegmentCost Builder::overlap_chunk(const std::vector<TpGemm>& gemms, TpRole role, int pass,
                                   std::int64_t chunks, const ComputeModel* own_fewer_sms) const {
  // A TP-overlap chunk GEMM is priced as it runs beside its own collective. Another
  // collective's NCCL kernels beside the chunk (an FSDP all-gather, a gradient reduce-scatter)
  // slow it as they slow every GEMM: by the plain NCCL factor when its own transfers hold no SMs
  // (async TP's copy engines: the stack's ag_sms or rs_sms is 0) or are not in its price (TE's
  // ring exchange, 1 SM in Megatron's file); on the SMs left by both (cm_rs_nccl_) when its own
  // reduce-scatter's are (userbuffers, 24). Its own SM-holding transfers are not that other
  // collective: the caller prices the op beside the TP stream.
  SegmentCost c;
  c.time = gemms_time(gemms, role, pass, chunks, own_fewer_sms);
  const ComputeModel* beside_nccl = own_fewer_sms ? (cm_rs_nccl_ ? &*cm_rs_nccl_ : nullptr)
                                    : cm_nccl_    ? &*cm_nccl_
                                                  : nullptr;
  c.interfered = beside_nccl ? gemms_time(gemms, role, pass, chunks, beside_nccl) : c.time;
  c.hbm_s = gemms_hbm_s(gemms, role, pass, chunks);
  c.kernels = gemms_kernels(gemms, role, pass);
  return c;
}

double Builder::gemms_kernels(const std::vector<TpGemm>& gemms, TpRole role, int pass) {
  double n = 0;
  for_each_gemm(gemms, role, pass, [&](const Kernel&) { n += 1; });
  return n;
}

bool Builder::captured(const RankState& rs, StreamId stream) const {
  if (!rs.capturing) return false;
  return opt_.stack.cuda_graphs == CudaGraphs::iteration || stream == rs.compute ||
         stream == rs.tp || stream == rs.cp || stream == rs.ep;
}

void Builder::issue(RankState& rs, double kernels, std::vector<OpId>& deps, std::string_view name,
                    StreamId stream) {
  if (!rs.host || kernels <= 0) return;
  // A captured graph is launched once, before its first op (assumption: a graph launch costs the
  // host what one kernel launch does).
  if (captured(rs, stream)) {
    if (rs.graph_launched) return;
    rs.graph_launched = true;
    kernels = 1;
  }
  // Assumption (named in the README): the host launches every op of the rank in the order the
  // trace emits them, never waits for the GPU within a step (launches are asynchronous; NCCL
  // waits are stream waits) and is not held back by a full launch queue; an op starts once all
  // its kernels are launched.
  const OpId id = trace_.graph.add_op(*rs.host, name,
                                      Time::from_seconds_ceil(kernels * cm_.host_per_kernel_s()));
  TraceOpInfo info;
  info.rank = rs.rank;
  info.kind = "host";
  info.host = true;
  trace_.info.push_back(info);
  trace_.launches = true;
  deps.push_back(id);
}

OpId Builder::bulk_gemm(RankState& rs, const std::string& name, const std::vector<TpGemm>& gemms,
                        int pass) {
  // The GEMM keeps every SM but shares bulk_sms of them with the collective while it runs
  // (software-stacks.md §1: "all (no margin)"): with the stack's interference on, the replay
  // slows it for that time only; beside another collective's NCCL kernels (a DP reduce-scatter)
  // as any GEMM; beside both, on the SMs both leave. Without, the whole GEMM is priced beside its
  // own collective.
  const auto priced = [&](const std::optional<ComputeModel>& fewer) {
    return gemms_time(gemms, TpRole::column_parallel, pass, 1, fewer ? &*fewer : nullptr);
  };
  SegmentCost c;
  const Time own = priced(cm_bulk_);
  c.kernels = gemms_kernels(gemms, TpRole::column_parallel, pass);
  if (!opt_.stack.interference.on) return fixed_compute(rs, name, own, c.kernels);
  c.hbm_s = gemms_hbm_s(gemms, TpRole::column_parallel, pass, 1);
  c.time = priced(std::nullopt);
  c.interfered = priced(cm_nccl_);
  const OpId id = compute(rs, name, c, false, static_cast<std::int32_t>(rs.tp.value));
  auto& info = trace_.info.back();
  info.own_slowdown = slowdown_factor(c.time, own);
  info.both_slowdown =
      slowdown_factor(c.time, cm_bulk_nccl_ ? priced(cm_bulk_nccl_) : std::max(own, c.interfered));
  return id;
}

void Builder::overlapped_segment(RankState& rs, const std::string& name, const SegmentCost& seg,
                                 const std::vector<TpGemm>& gemms, const Overlap& o, bool recompute,
                                 std::uint64_t inst) {
  const auto& ov = opt_.stack.tp_overlap;
  const auto& group = group_of(rs.rank, GroupKind::tp);
  const std::int64_t t = mesh_.tp;
  // The chunk GEMMs' own transfers run on the TP stream (TraceOpInfo::priced_beside).
  const auto own_tp = static_cast<std::int32_t>(rs.tp.value);
  Time used;
  double used_kernels = 0, used_hbm_s = 0;
  // All-gather before: a ring exchange of t chunks; GEMM chunk j runs on the chunk that has
  // arrived while chunk j + 1 travels (TE ring exchange; async TP's pipelined all-gather). The
  // first chunk is local, so only what a chunk GEMM cannot cover stays exposed.
  if (o.ag_role) {
    std::vector<OpId> deps;
    if (rs.last_compute) deps.push_back(*rs.last_compute);
    auto pending = std::move(rs.pending);
    rs.pending.clear();
    std::vector<OpId> steps;
    for (std::int64_t j = 1; j < t; ++j) {
      steps.push_back(comm(rs, rs.tp, name + ".ag" + std::to_string(j), GroupKind::tp,
                           CollectiveOp::all_gather, group, gather_bytes(),
                           j == 1 ? deps : std::vector<OpId>{},
                           inst + static_cast<std::uint64_t>(j), CollectiveAlgo::ring,
                           1.0 / static_cast<double>(t - 1)));
      trace_.info.back().holds_sms = ov.ag_sms > 0;
    }
    rs.pending = std::move(pending);
    const SegmentCost piece = overlap_chunk(gemms, *o.ag_role, o.pass, t, nullptr);
    for (std::int64_t j = 0; j < t; ++j) {
      if (j > 0) rs.pending.push_back(steps[static_cast<std::size_t>(j - 1)]);
      compute(rs, name + ".agemm" + std::to_string(j), piece, false, own_tp);
    }
    used += gemms_time(gemms, *o.ag_role, o.pass, 1, nullptr);
    used_kernels += piece.kernels;
    used_hbm_s += gemms_hbm_s(gemms, *o.ag_role, o.pass, 1);
  }
  const Time producers = o.rs_role ? gemms_time(gemms, *o.rs_role, o.pass, 1, nullptr) : Time{};
  const Time bulk =
      o.bulk_wgrad ? gemms_time(gemms, TpRole::column_parallel, 2, 1, nullptr) : Time{};
  const Time col_dgrad =
      o.bulk_dgrad_ag ? gemms_time(gemms, TpRole::column_parallel, 1, 1, nullptr) : Time{};
  used += producers + bulk + col_dgrad;
  if (o.rs_role) {
    used_kernels += gemms_kernels(gemms, *o.rs_role, o.pass);
    used_hbm_s += gemms_hbm_s(gemms, *o.rs_role, o.pass, 1);
  }
  if (o.bulk_wgrad) {
    used_kernels += gemms_kernels(gemms, TpRole::column_parallel, 2);
    used_hbm_s += gemms_hbm_s(gemms, TpRole::column_parallel, 2, 1);
  }
  if (o.bulk_dgrad_ag) {
    used_kernels += gemms_kernels(gemms, TpRole::column_parallel, 1);
    used_hbm_s += gemms_hbm_s(gemms, TpRole::column_parallel, 1, 1);
  }
  // The segment's other kernels (norms, RoPE, activation, the GEMMs not overlapped), with the
  // segment's FLOPs.
  compute(rs, name, without(seg, used, used_kernels, used_hbm_s), recompute);
  std::optional<OpId> regathered;
  if (o.bulk_dgrad_ag) {
    regathered = comm(rs, rs.tp, name + ".ag_bulk", GroupKind::tp, CollectiveOp::all_gather, group,
                      gather_bytes(), {*rs.last_compute}, inst + 300);
    // Else priced into the dgrad; async TP's copies hold no SMs (bulk_sms 0).
    trace_.info.back().holds_sms = opt_.stack.interference.on && ov.bulk_sms > 0;
    bulk_gemm(rs, name + ".dgrad", gemms, 1);
    if (!o.bulk_wgrad) rs.pending.push_back(*regathered);
  }
  if (o.rs_role) {
    // Reduce-scatter after: the GEMM in chunks along M, each chunk's RS overlapping the next
    // chunk; the last RS is exposed. userbuffers runs the GEMM on SMs − rs_sms.
    const std::int64_t k = ov.rs_splits > 0 ? ov.rs_splits : t;
    const SegmentCost piece =
        overlap_chunk(gemms, *o.rs_role, o.pass, k, cm_rs_ ? &*cm_rs_ : nullptr);
    OpId last{};
    for (std::int64_t i = 0; i < k; ++i) {
      compute(rs, name + ".rgemm" + std::to_string(i), piece, false, own_tp);
      last = comm(rs, rs.tp, name + ".rs" + std::to_string(i), GroupKind::tp,
                  CollectiveOp::reduce_scatter, group, costs_.tp_bytes / static_cast<double>(k),
                  {*rs.last_compute}, inst + 100 + static_cast<std::uint64_t>(i));
      trace_.info.back().holds_sms = ov.rs_sms > 0;
    }
    rs.pending.push_back(last);
  }
  if (o.bulk_wgrad) {
    // Bulk: the reduce-scatter of the dgrad output runs beside the whole wgrad GEMM (TE
    // qkv/fc1 wgrad), which keeps every SM but shares them with the collective's bulk_sms.
    const auto id = comm(rs, rs.tp, name + ".rs_bulk", GroupKind::tp, CollectiveOp::reduce_scatter,
                         group, costs_.tp_bytes, {*rs.last_compute}, inst + 200);
    trace_.info.back().holds_sms = opt_.stack.interference.on && ov.bulk_sms > 0;  // as above
    if (regathered) rs.pending.push_back(*regathered);  // the wgrad's input
    bulk_gemm(rs, name + ".wgrad", gemms, 2);
    rs.pending.push_back(id);
  }
}

OpId Builder::comm(RankState& rs, StreamId s, const std::string& name, GroupKind g, CollectiveOp op,
                   std::vector<std::int32_t> ranks, double bytes, std::vector<OpId> deps,
                   std::uint64_t inst, std::optional<CollectiveAlgo> algo, double fraction,
                   bool sender_only, double network_share) {
  CommRequest r;
  r.kind = g;
  r.call = {op, std::move(ranks), bytes, network_share};
  r.algo = algo;
  r.fraction = fraction;
  r.instance = hash_combine(inst, static_cast<std::uint64_t>(g) * 1000 + rs.slot++ % 1000);
  r.sender_only = sender_only;
  TraceOpInfo info;
  info.rank = rs.rank;
  info.comm = true;
  info.group = g;
  info.kind = fraction < 1.0 ? std::string_view("kv_exchange") : op_name(op);
  info.bytes = bytes * fraction;
  info.wire_bytes = wire_bytes(op, bytes, r.call.ranks.size()) * fraction;
  issue(rs, 1, deps, name, s);
  const OpId id = comm_.add(trace_.graph, s, name, r, std::move(deps));
  trace_.info.push_back(info);
  return id;
}

void Builder::tp(RankState& rs, CollectiveOp op, const std::string& name, std::uint64_t inst,
                 std::optional<double> bytes) {
  if (mesh_.tp == 1) return;
  std::vector<OpId> deps;
  if (rs.last_compute) deps.push_back(*rs.last_compute);
  rs.pending.push_back(comm(rs, rs.tp, name, GroupKind::tp, op, group_of(rs.rank, GroupKind::tp),
                            bytes.value_or(costs_.tp_bytes), std::move(deps), inst));
}

SegmentCost Builder::without(const SegmentCost& seg, Time used, double used_kernels,
                             double used_hbm_s) {
  SegmentCost rest = seg;
  rest.kernels = std::max(0.0, seg.kernels - used_kernels);
  rest.hbm_s = std::max(0.0, seg.hbm_s - used_hbm_s);
  rest.time = seg.time > used ? seg.time - used : Time::zero();
  const double scale = seg.time > Time::zero() ? rest.time.seconds() / seg.time.seconds() : 0.0;
  rest.interfered = Time::from_seconds_ceil(seg.interfered.seconds() * scale);
  return rest;
}

SegmentCost Builder::gemm_piece(const std::vector<TpGemm>& gemms, TpRole role, int pass) const {
  SegmentCost c;
  c.time = gemms_time(gemms, role, pass, 1, nullptr);
  c.interfered = cm_nccl_ ? gemms_time(gemms, role, pass, 1, &*cm_nccl_) : c.time;
  c.hbm_s = gemms_hbm_s(gemms, role, pass, 1);
  c.kernels = gemms_kernels(gemms, role, pass);
  return c;
}

void Builder::column_backward(RankState& rs, const std::string& name, const SegmentCost& seg,
                              const std::vector<TpGemm>& gemms, bool split_w,
                              const std::string& reduce, std::uint64_t inst) {
  const auto& tb = opt_.stack.tp_backward;
  const auto op = sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce;
  const bool regather = sp_ && tb.regather_input && mesh_.tp > 1;
  const bool beside_wgrad = tb.overlap_with_wgrad && mesh_.tp > 1 && !split_w;
  if (!regather && !beside_wgrad) {
    compute(rs, name, seg, false);
    tp(rs, op, reduce, inst);
    return;
  }
  const SegmentCost dgrad = gemm_piece(gemms, TpRole::column_parallel, 1);
  const SegmentCost wgrad = split_w ? SegmentCost{} : gemm_piece(gemms, TpRole::column_parallel, 2);
  // The kernels before the column-parallel GEMMs' backward (row-parallel GEMMs, activation,
  // RoPE), with the segment's FLOPs.
  compute(rs, name,
          without(seg, dgrad.time + wgrad.time, dgrad.kernels + wgrad.kernels,
                  dgrad.hbm_s + wgrad.hbm_s),
          false);
  // The saved input shard is all-gathered again while the dgrad GEMM runs.
  std::optional<OpId> regathered;
  if (regather)
    regathered =
        comm(rs, rs.tp, name + ".tp_regather", GroupKind::tp, CollectiveOp::all_gather,
             group_of(rs.rank, GroupKind::tp), gather_bytes(), {*rs.last_compute}, inst + 50);
  compute(rs, name + ".dgrad", dgrad, false);
  if (!beside_wgrad) {
    // The wgrad (or, zero-bubble, the deferred weight pass) waits for the gathered input.
    if (regathered) rs.pending.push_back(*regathered);
    if (wgrad.time > Time::zero()) compute(rs, name + ".wgrad", wgrad, false);
    tp(rs, op, reduce, inst);
    return;
  }
  // The input gradient's reduction runs beside the wgrad GEMM.
  const auto reduced = comm(rs, rs.tp, reduce, GroupKind::tp, op, group_of(rs.rank, GroupKind::tp),
                            costs_.tp_bytes, {*rs.last_compute}, inst);
  if (regathered) rs.pending.push_back(*regathered);
  compute(rs, name + ".wgrad", wgrad, false);
  rs.pending.push_back(reduced);
}

// EP all-to-all (dispatch or combine, either direction): on the critical path of the experts.
// With DeepEP (Stack::ep_dispatch) a token crosses to each node once: the group's all-to-all
// runs hierarchical with the deduplicated share of its network bytes.
void Builder::ep(RankState& rs, const std::string& name, std::uint64_t inst) {
  const auto& group = group_of(rs.rank, GroupKind::ep);
  const double share = ep_network_share(group);
  rs.pending.push_back(comm(
      rs, rs.ep, name, GroupKind::ep, CollectiveOp::all_to_all, group, costs_.a2a_bytes,
      {*rs.last_compute}, inst,
      share < 1.0 ? std::optional(CollectiveAlgo::hierarchical) : std::nullopt, 1.0, false, share));
}

double Builder::ep_network_share(const std::vector<std::int32_t>& group) {
  const Topology* topo = comm_.topology();
  if (opt_.stack.ep_dispatch != EpDispatch::deepep || !m_.moe || !topo || group.size() < 2)
    return 1.0;
  if (const auto it = ep_shares_.find(group.front()); it != ep_shares_.end()) return it->second;
  // EP rank i holds experts [i·E/ep, (i+1)·E/ep) (Megatron-Core's expert placement), on the
  // node of its GPU.
  const auto E = m_.moe->experts;
  const auto ep = static_cast<std::int64_t>(group.size());
  std::map<std::int32_t, std::vector<ExpertRange>> by_node;
  for (std::int64_t i = 0; i < ep; ++i) {
    const auto node =
        topo->vertex(topo->gpus()[static_cast<std::size_t>(group[static_cast<std::size_t>(i)])])
            .node;
    by_node[node].emplace_back(i * E / ep, (i + 1) * E / ep);
  }
  // DeepEP forwards on the rail, to the same local rank on every node: a group with different
  // numbers of ranks on its nodes runs the plain all-to-all (so does DeepEP's
  // intranode-only path).
  NodeExperts nodes;
  for (auto& [node, experts] : by_node) nodes.push_back(std::move(experts));
  for (const auto& n : nodes)
    if (n.size() != nodes.front().size())
      return ep_shares_.emplace(group.front(), 1.0).first->second;
  return ep_shares_.emplace(group.front(), dedup_network_share(*m_.moe, nodes)).first->second;
}

void Builder::attention(RankState& rs, const std::string& name, const SegmentCost& seg,
                        bool backward, bool recompute, std::uint64_t inst) {
  if (mesh_.cp == 1) {
    compute(rs, name, seg, recompute);
    return;
  }
  const auto& group = group_of(rs.rank, GroupKind::cp);
  const double step = costs_.kv_step_bytes * (backward ? 2.0 : 1.0);  // + dK, dV backward
  const auto cp = static_cast<double>(mesh_.cp);
  if (opt_.stack.cp_comm == CpComm::allgather) {
    // Llama 3's CP: all-gather K and V before attention (and reduce-scatter their gradients).
    std::vector<OpId> deps;
    if (rs.last_compute) deps.push_back(*rs.last_compute);
    rs.pending.push_back(comm(rs, rs.cp, name + ".cp_ag", GroupKind::cp, CollectiveOp::all_gather,
                              group, costs_.kv_step_bytes * cp, std::move(deps), inst));
    compute(rs, name, seg, recompute);
    if (backward) {
      comm(rs, rs.cp, name + ".cp_rs", GroupKind::cp, CollectiveOp::reduce_scatter, group,
           costs_.kv_step_bytes * cp, {*rs.last_compute}, inst);
    }
    return;
  }
  // Ring attention (Liu et al. 2023; Megatron-Core CP): cp chunks of attention, each overlapped
  // with the next K/V block's transfer around the ring; each step is one ring all-gather step
  // and one kernel over that step's short key block (strategy/ring_attention.hpp).
  const double ring = (backward ? costs_.ring_backward : costs_.ring_forward) / cp;
  SegmentCost part = seg;
  part.time = Time::from_seconds_ceil(seg.time.seconds() * ring);
  part.interfered = Time::from_seconds_ceil(seg.interfered.seconds() * ring);
  part.model_flops /= cp;
  part.hardware_flops /= cp;
  part.hbm_s /= cp;  // each step streams its share of the kernel's bytes
  std::vector<OpId> deps;
  if (rs.last_compute) deps.push_back(*rs.last_compute);
  auto pending = std::move(rs.pending);
  rs.pending.clear();
  std::vector<OpId> steps;
  for (std::int64_t j = 0; j + 1 < mesh_.cp; ++j)
    steps.push_back(comm(rs, rs.cp, name + ".kv" + std::to_string(j), GroupKind::cp,
                         CollectiveOp::all_gather, group, step * cp,
                         j == 0 ? deps : std::vector<OpId>{}, inst + static_cast<std::uint64_t>(j),
                         CollectiveAlgo::ring, 1.0 / (cp - 1)));
  rs.pending = std::move(pending);
  for (std::int64_t j = 0; j < mesh_.cp; ++j) {
    if (j > 0) rs.pending.push_back(steps[static_cast<std::size_t>(j - 1)]);
    compute(rs, name + "." + std::to_string(j), part, recompute);
  }
}

OpId Builder::copy_kernel(RankState& rs, StreamId s, const std::string& name, GroupKind g,
                          double bytes, std::vector<OpId> deps) {
  const Time t = cm_.stream_time(memory_kernel(MemoryClass::elementwise, bytes));
  issue(rs, 1, deps, name, s);
  const OpId id = trace_.graph.add_op(s, name, t, std::move(deps));
  TraceOpInfo info;
  info.rank = rs.rank;
  info.comm = true;  // part of its collective's call, on the collective's stream
  info.group = g;
  info.kind = "fsdp_copy_in";
  // A copy kernel streams HBM for its whole time apart from its fixed cost.
  if (t > Time::zero())
    info.hbm_demand =
        static_cast<float>(std::min(1.0, bytes / hbm_achievable_Bps(cm_) / t.seconds()));
  trace_.info.push_back(info);
  return id;
}

void Builder::gather_layer(RankState& rs, std::int64_t layer, std::uint64_t inst) {
  // ZeRO-3/FSDP: all-gather this layer's weights, prefetched one layer ahead: the gather may
  // start once the layer before the previous one is done.
  const auto& p = plan(layer);
  // The first layer's gather brings the embedding too, the last layer's the head.
  const double ends = (layer == 0 ? costs_.embedding.params : 0.0) +
                      (layer == m_.layers - 1 ? costs_.head.params : 0.0);
  std::vector<OpId> deps;
  if (rs.layer_done.size() >= 2) deps.push_back(rs.layer_done[rs.layer_done.size() - 2]);
  const std::string n = "L" + std::to_string(layer);
  const bool copies = opt_.stack.fsdp_copies.on;
  // Weights are gathered in 16 bits (kGatheredBytesPerParam), FP8 runs included, so the copy
  // kernels move 16-bit buffers too; but for the FP8 linears' weights on a stack that gathers
  // them in FP8 (LayerPlan::fp8_gathered_params), which move one byte.
  constexpr double gathered_bytes = kGatheredBytesPerParam;
  const double fp8_bytes = bytes_of(DType::fp8);
  const double state_bytes = opt_.stack.state.weight;
  double gathered_buffer = 0;  // bytes of this layer's gathered buffers
  auto gather = [&](const std::string& name, GroupKind g, double params, double fp8_params,
                    double group) {
    auto after = deps;
    const double wide = params - fp8_params;
    // FSDP2 copy-in: the local shards (in their stored dtype) cast into the all-gather buffer.
    double shard_bytes = copies ? wide / group * (state_bytes + gathered_bytes) : 0.0;
    // torchao's fsdp_pre_all_gather casts each FP8 linear's shard (read in its stored dtype,
    // written in FP8), after an amax over the shard where the scale is not precomputed (its
    // one-value all-reduce is not priced; precomputed scales cost one amax pass a step, not
    // priced either), and FSDP2 copies the FP8 shard into the buffer. Assumption (README): one
    // kernel for the shard's casts and copy, at the copy kernels' bandwidth. FP8 parameters
    // (Stack::fp8_params) are FP8 already: the copy alone.
    if (fp8_params > 0) {
      const auto mode = opt_.stack.fp8_fsdp_all_gather;
      const double cast = mode == Fp8FsdpAllGather::none ? 0.0
                          : mode == Fp8FsdpAllGather::dynamic
                              ? 2 * state_bytes + fp8_bytes  // amax read, cast read and write
                              : state_bytes + fp8_bytes;
      shard_bytes += fp8_params / group * (cast + (copies ? 2 * fp8_bytes : 0.0));
    }
    if (shard_bytes > 0)
      after = {copy_kernel(rs, rs.dpg, name + ".copy_in", g, shard_bytes, std::move(after))};
    const double bytes = gathered_weight_bytes(params, fp8_params);
    rs.pending.push_back(comm(rs, rs.dpg, name, g, CollectiveOp::all_gather, group_of(rs.rank, g),
                              bytes, std::move(after), inst));
    gathered_buffer += bytes;
  };
  if (mesh_.shard_group() > 1)
    gather(n + ".fsdp_ag", shard_kind(), p.dense_params + ends, p.fp8_gathered_params,
           static_cast<double>(mesh_.shard_group()));
  if (p.expert_params > 0 && mesh_.expert_replicas() > 1)
    gather(n + ".fsdp_ag_experts", GroupKind::edp, p.expert_params, 0.0,
           static_cast<double>(mesh_.expert_replicas()));
  // FSDP2 copy-out on the compute stream before the layer runs: the gathered buffer read and
  // written into the unsharded parameters.
  if (copies && gathered_buffer > 0) {
    const Kernel k = memory_kernel(MemoryClass::elementwise, 2 * gathered_buffer);
    SegmentCost c;
    c.time = cm_.stream_time(k);
    c.interfered = c.time;
    c.hbm_s = k.bytes / hbm_achievable_Bps(cm_);
    c.kernels = 1;
    compute(rs, n + ".fsdp_copy_out", c, false);
  }
}

void Builder::recompute_selective(RankState& rs, const std::string& name, const LayerPlan& p,
                                  std::uint64_t inst) {
  const bool ep_layer = p.moe && mesh_.ep > 1;
  const bool dispatch = ep_layer && p.recompute_dispatch, combine = ep_layer && p.recompute_combine;
  if (p.recompute_tp_gemms.empty() && !dispatch && !combine) {
    compute(rs, name, p.recompute, true);
    return;
  }
  // With TP overlap a dense layer's re-run MLP overlaps its collectives as its forward did
  // (TE's userbuffers serve the checkpointed fc1 and fc2 alike); MoE layers' shared experts run
  // theirs exposed, as in their forward.
  if (overlap_ && !p.moe) {
    overlapped_segment(
        rs, name, p.recompute, p.recompute_tp_gemms,
        {0, p.recompute_gathers > 0 ? std::optional(TpRole::column_parallel) : std::nullopt,
         p.recompute_reductions > 0 ? std::optional(TpRole::row_parallel) : std::nullopt, false},
        true, inst);
    return;
  }
  // Gathers, then the dispatch all-to-all, before the re-run kernels (the router, which runs
  // before the dispatch, priced with them); the combine and reductions after.
  for (int i = 0; i < p.recompute_gathers && sp_; ++i)
    tp(rs, CollectiveOp::all_gather, name + ".tp_ag" + std::to_string(i),
       inst + static_cast<std::uint64_t>(i), gather_bytes(p.moe));
  if (dispatch) ep(rs, name + ".dispatch", inst + 20);
  compute(rs, name, p.recompute, true);
  if (combine) ep(rs, name + ".combine", inst + 21);
  for (int i = 0; i < p.recompute_reductions; ++i)
    tp(rs, sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
       name + ".tp_reduce" + std::to_string(i), inst + 10 + static_cast<std::uint64_t>(i));
}

void Builder::forward_layer(RankState& rs, std::int64_t mb, std::int64_t layer, bool recompute,
                            int piece) {
  const LayerGraph graph(rs, opt_.stack.cuda_graphs == CudaGraphs::layer);
  const auto& p = plan(layer);
  const std::string n = "F" + std::to_string(mb) + ".L" + std::to_string(layer);
  const auto inst = instance(mb, layer, recompute ? 3 : 0);
  const auto seg = [&](Seg s) { return p.forward[static_cast<std::size_t>(s)]; };
  const auto gemms = [&](Seg s) -> const std::vector<TpGemm>& {
    return p.tp_gemms[static_cast<std::size_t>(s)];
  };
  const bool ep_layer = p.moe && mesh_.ep > 1;
  if (piece < 0 || piece == 0) {  // up to the dispatch
    if (cfg_.zero >= 3 && !recompute && !rs.resident.contains(layer)) {
      gather_layer(rs, layer, inst);
      if (step_gather_) rs.resident.insert(layer);
    }
    if (auto it = rs.param_gather.find(layer); it != rs.param_gather.end()) {
      rs.pending.push_back(it->second);
      rs.param_gather.erase(it);
    }
    compute(rs, n + ".norm", seg(Seg::norm1), recompute);
    if (overlap_) {
      overlapped_segment(rs, n + ".qkv", seg(Seg::qkv), gemms(Seg::qkv),
                         {0, TpRole::column_parallel, std::nullopt, false}, recompute, inst + 1);
    } else {
      if (sp_) tp(rs, CollectiveOp::all_gather, n + ".tp_ag", inst + 1, gather_bytes());
      compute(rs, n + ".qkv", seg(Seg::qkv), recompute);
    }
    attention(rs, n + ".attn", seg(Seg::attn), false, recompute, inst + 2);
    if (overlap_) {
      overlapped_segment(rs, n + ".out", seg(Seg::out), gemms(Seg::out),
                         {0, std::nullopt, TpRole::row_parallel, false}, recompute, inst + 3);
    } else {
      compute(rs, n + ".out", seg(Seg::out), recompute);
      tp(rs, sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, n + ".tp_out",
         inst + 3);
    }
    compute(rs, n + ".mid", seg(Seg::mid), recompute);
    if (ep_layer) ep(rs, n + ".dispatch", inst + 4);
  }
  if (piece < 0 || piece == 1) {  // the MLP, up to the combine and the TP reduction after it
    if (overlap_ && !p.moe) {
      overlapped_segment(rs, n + ".mlp", seg(Seg::mlp), gemms(Seg::mlp),
                         {0, TpRole::column_parallel, TpRole::row_parallel, false}, recompute,
                         inst + 5);
    } else {
      if (sp_ && p.tp_reduce_after_mlp)
        tp(rs, CollectiveOp::all_gather, n + ".tp_ag2", inst + 5, gather_bytes(p.moe));
      compute(rs, n + ".mlp", seg(Seg::mlp), recompute);
      if (ep_layer) ep(rs, n + ".combine", inst + 6);
      if (p.tp_reduce_after_mlp)
        tp(rs, sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, n + ".tp_mlp",
           inst + 7);
    }
  }
  if (piece < 0 || piece == 2) {
    compute(rs, n + ".end", seg(Seg::end), recompute);
    if (!recompute) rs.layer_done.push_back(*rs.last_compute);
  }
}

void Builder::backward_layer(RankState& rs, std::int64_t mb, std::int64_t layer, bool split_w,
                             int piece) {
  const LayerGraph graph(rs, opt_.stack.cuda_graphs == CudaGraphs::layer);
  const auto& p = plan(layer);
  const std::string n = "B" + std::to_string(mb) + ".L" + std::to_string(layer);
  const auto inst = instance(mb, layer, 1);
  const auto seg = [&](Seg s) {
    SegmentCost c = p.dgrad[static_cast<std::size_t>(s)];
    if (!split_w) c += p.wgrad[static_cast<std::size_t>(s)];
    return c;
  };
  const auto gemms = [&](Seg s) -> const std::vector<TpGemm>& {
    return p.tp_gemms[static_cast<std::size_t>(s)];
  };
  const bool ep_layer = p.moe && mesh_.ep > 1;
  const bool regather = sp_ && opt_.stack.tp_backward.regather_input;
  // An MoE layer's MLP backward waits for its combine's gradient all-to-all: the piece before it
  // ends there.
  const bool plain_mlp = !(overlap_ && !p.moe) && !(!p.moe && p.tp_reduce_after_mlp);
  if (piece < 0 || piece == 0) {
    if (cfg_.zero >= 3 && cfg_.reshard_after_forward) gather_layer(rs, layer, inst + 20);
    if (checkpointed(layer)) forward_layer(rs, mb, layer, true);
    // Selective recompute re-runs the policy's ops before the layer's backward (with fused
    // attention and the default policy there is nothing to re-run: its backward already
    // recomputes the scores).
    if (cfg_.recompute == Recompute::selective && p.recompute.time > Time::zero())
      recompute_selective(rs, n + ".recompute", p, instance(mb, layer, 4));
    compute(rs, n + ".end", seg(Seg::end), false);
    if (plain_mlp) {
      if (sp_ && p.tp_reduce_after_mlp)
        tp(rs, CollectiveOp::all_gather, n + ".tp_ag2", inst + 1, gather_bytes(p.moe));
      if (ep_layer) ep(rs, n + ".combine", inst + 2);
    }
  }
  if (piece < 0 || piece == 1) {
    if (overlap_ && !p.moe) {
      // The output gradient's all-gather by ring exchange under the FC2 dgrad; FC1's saved input
      // re-gathered beside its dgrad and its dgrad output reduce-scattered beside its wgrad
      // (bulk).
      overlapped_segment(rs, n + ".mlp", seg(Seg::mlp), gemms(Seg::mlp),
                         {1, TpRole::row_parallel, std::nullopt, !split_w, regather}, false,
                         inst + 1);
      if (split_w) tp(rs, CollectiveOp::reduce_scatter, n + ".tp_mlp", inst + 4);
    } else if (!p.moe && p.tp_reduce_after_mlp) {
      if (sp_) tp(rs, CollectiveOp::all_gather, n + ".tp_ag2", inst + 1, gather_bytes());
      column_backward(rs, n + ".mlp", seg(Seg::mlp), gemms(Seg::mlp), split_w, n + ".tp_mlp",
                      inst + 4);
    } else {
      compute(rs, n + ".mlp", seg(Seg::mlp), false);
      if (ep_layer) ep(rs, n + ".dispatch", inst + 3);
      if (p.tp_reduce_after_mlp)
        tp(rs, sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, n + ".tp_mlp",
           inst + 4);
    }
  }
  if (piece < 0 || piece == 2) {
    compute(rs, n + ".mid", seg(Seg::mid), false);
    if (overlap_) {
      overlapped_segment(rs, n + ".out", seg(Seg::out), gemms(Seg::out),
                         {1, TpRole::row_parallel, std::nullopt, false}, false, inst + 5);
    } else {
      if (sp_) tp(rs, CollectiveOp::all_gather, n + ".tp_ag", inst + 5, gather_bytes());
      compute(rs, n + ".out", seg(Seg::out), false);
    }
    attention(rs, n + ".attn", seg(Seg::attn), true, false, inst + 6);
    if (overlap_ && !split_w) {
      overlapped_segment(rs, n + ".qkv", seg(Seg::qkv), gemms(Seg::qkv),
                         {1, std::nullopt, std::nullopt, true, regather}, false, inst + 7);
    } else {
      column_backward(rs, n + ".qkv", seg(Seg::qkv), gemms(Seg::qkv), split_w, n + ".tp_qkv",
                      inst + 7);
    }
    compute(rs, n + ".norm", seg(Seg::norm1), false);
    rs.layer_done.push_back(*rs.last_compute);
  }
}

void Builder::reduce_grads(RankState& rs, std::int64_t g, std::int64_t first, std::int64_t count,
                           bool last_mb, OpId after, std::uint64_t inst, bool with_ends) {
  // Gradients of layers [first, first + count) of chunk g are ready after `after`.
  const bool every_mb = cfg_.zero >= 2 && !step_sync_;
  if (!every_mb && !last_mb) return;
  const auto op = cfg_.zero == 0 ? CollectiveOp::all_reduce : CollectiveOp::reduce_scatter;
  double dense = 0, expert = 0;
  // Gradients travel in the stack's reduction dtype (fp32 doubles the bytes of bf16).
  for (std::int64_t l = first; l < first + count; ++l) {
    dense += plan(l).dense_params * grad_bytes_;
    expert += plan(l).expert_params * grad_bytes_;
  }
  if (with_ends) dense += end_params(g) * grad_bytes_;
  const std::string n = "grads.c" + std::to_string(g) + ".L" + std::to_string(first);
  // FSDP2's reduce-scatter copy-in (`_chunk_cat`): the unsharded 16-bit gradients
  // (kGatheredBytesPerParam, FP8 runs included) read and written into the buffer in the
  // reduction dtype.
  const auto grads_copied = [&](const std::string& name, GroupKind kind, double bytes) {
    if (!opt_.stack.fsdp_copies.on || op != CollectiveOp::reduce_scatter) return after;
    const double params = bytes / grad_bytes_;
    return copy_kernel(rs, rs.dp, name + ".copy_in", kind,
                       params * (kGatheredBytesPerParam + grad_bytes_), {after});
  };
  if (mesh_.dense_replicas() > 1 && dense > 0) {
    if (cfg_.zero >= 1 && mesh_.fsdp > 0) {
      // HSDP: reduce-scatter inside the shard group, then all-reduce each shard across the
      // groups that hold it (torchtitan's HSDP; Megatron-Core's distributed-optimizer instances).
      OpId ready = after;
      if (mesh_.shard_group() > 1)
        ready = rs.last_dp.emplace(comm(rs, rs.dp, n, GroupKind::shard, op,
                                        group_of(rs.rank, GroupKind::shard), dense,
                                        {grads_copied(n, GroupKind::shard, dense)}, inst));
      rs.last_dp = comm(rs, rs.dp, n + ".replicas", GroupKind::replica, CollectiveOp::all_reduce,
                        group_of(rs.rank, GroupKind::replica),
                        dense / static_cast<double>(mesh_.shard_group()), {ready}, inst + 2);
    } else {
      rs.last_dp = comm(rs, rs.dp, n, GroupKind::dp_cp, op, group_of(rs.rank, GroupKind::dp_cp),
                        dense, {grads_copied(n, GroupKind::dp_cp, dense)}, inst);
    }
  }
  if (mesh_.expert_replicas() > 1 && expert > 0)
    rs.last_dp =
        comm(rs, rs.dp, n + ".experts", GroupKind::edp, op, group_of(rs.rank, GroupKind::edp),
             expert, {grads_copied(n + ".experts", GroupKind::edp, expert)}, inst + 1);
}

std::vector<std::pair<std::int64_t, std::int64_t>> Builder::grad_buckets(std::int64_t g) const {
  const std::int64_t first = first_layer(g), count = chunk_layers_[static_cast<std::size_t>(g)];
  if (zb_) return {{first, count}};
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  double bucket = 0;
  std::int64_t bucket_end = first + count;  // exclusive upper layer of the open bucket
  for (std::int64_t l = first + count - 1; l >= first; --l) {
    if (cfg_.zero >= 3) {
      out.emplace_back(l, 1);
      continue;
    }
    bucket += (plan(l).dense_params + plan(l).expert_params) * grad_bytes_;
    if (bucket >= bucket_bytes_ || l == first) {
      out.emplace_back(l, bucket_end - l);
      bucket = 0;
      bucket_end = l;
    }
  }
  return out;
}

Builder::Reductions Builder::reductions(std::int64_t stage, std::int64_t g) {
  // Emitted as emit() does (ZeRO-3 on zero-bubble schedules only with data-parallel replicas),
  // after a stand-in op, on a scratch graph priced by the folded model.
  Reductions out;
  if (zb_ && cfg_.zero >= 3 && mesh_.dense_replicas() <= 1) return out;
  RankCoord coord;
  coord.pp = stage;
  trace_ = Trace{};
  chains_->clear();
  RankState rs = rank_state(static_cast<std::int32_t>(pl_.rank_of(coord)));
  const OpId after = fixed_compute(rs, "grads ready", Time::zero(), 0);
  std::size_t last = 0;  // the last call's first op on the stream
  for (const auto& [first, count] : grad_buckets(g)) {
    last = trace_.graph.stream(rs.dp).ops.size();
    reduce_grads(rs, g, first, count, true, after, instance(0, first, 12), first == first_layer(g));
  }
  const auto& ops = trace_.graph.stream(rs.dp).ops;
  const auto d = chains_->durations(trace_.graph, ops);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    out.all += d[ops[i].value];
    if (i >= last) out.last += d[ops[i].value];
  }
  trace_ = Trace{};
  return out;
}

std::optional<Builder::SendKey> Builder::input_key(const RankState& rs,
                                                   const PipelineAction& a) const {
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  if (a.pass == PassKind::weight) return std::nullopt;
  const bool fwd = a.pass == PassKind::forward;
  if (fwd ? g == 0 : g == chunks() - 1) return std::nullopt;
  if (rank_at_stage(rs, (fwd ? g - 1 : g + 1) % mesh_.pp) == rs.rank) return std::nullopt;
  return SendKey{rs.rank, a.microbatch, g, fwd ? 0 : 1};
}

bool Builder::input_ready(const RankState& rs, const PipelineAction& a) const {
  const auto key = input_key(rs, a);
  return !key || sends_.contains(*key);
}

void Builder::receive(RankState& rs, const PipelineAction& a) {
  if (const auto key = input_key(rs, a)) rs.pending.push_back(sends_.at(*key));
}

void Builder::send(RankState& rs, const PipelineAction& a) {
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  const bool fwd = a.pass == PassKind::forward;
  const std::int64_t to = fwd ? g + 1 : g - 1;
  const auto dst = rank_at_stage(rs, to % mesh_.pp);
  if (dst == rs.rank) return;
  const std::string n = (fwd ? "F" : "B") + std::to_string(a.microbatch) + ".send";
  sends_[{static_cast<std::int32_t>(dst), a.microbatch, to, fwd ? 0 : 1}] =
      comm(rs, rs.pp, n, GroupKind::pp, CollectiveOp::send_recv,
           {rs.rank, static_cast<std::int32_t>(dst)}, costs_.pp_bytes, {*rs.last_compute},
           instance(a.microbatch, g, fwd ? 10 : 13), std::nullopt, 1.0, true);
}

void Builder::forward_begin(RankState& rs, const PipelineAction& a) {
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  const std::string mbs = std::to_string(a.microbatch);
  receive(rs, a);
  rs.layer_done.clear();
  if (g == 0) {
    compute(rs, "F" + mbs + ".embed", costs_.embedding.forward, false);
    tp(rs, sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, "F" + mbs + ".embed_tp",
       instance(a.microbatch, -1, 0));
  }
}

void Builder::forward_end(RankState& rs, const PipelineAction& a) {
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  const std::string mbs = std::to_string(a.microbatch);
  if (g == chunks() - 1) {
    if (sp_)
      tp(rs, CollectiveOp::all_gather, "F" + mbs + ".head_tp", instance(a.microbatch, -2, 0));
    compute(rs, "F" + mbs + ".head", costs_.head.forward, false);
    return;
  }
  send(rs, a);
}

Builder::BackwardPass Builder::backward_begin(RankState& rs, const PipelineAction& a) {
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  const std::string mbs = std::to_string(a.microbatch);
  if (g < chunks() - 1) {
    receive(rs, a);
  } else {
    SegmentCost h = costs_.head.dgrad;
    if (!zb_) h += costs_.head.wgrad;
    compute(rs, "B" + mbs + ".head", h, false);
    tp(rs, sp_ ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, "B" + mbs + ".head_tp",
       instance(a.microbatch, -2, 1));
  }
  rs.layer_done.clear();
  BackwardPass b;
  b.last = rs.step_last_backward.contains({a.chunk, a.microbatch});
  if (!zb_) b.buckets = grad_buckets(g);
  return b;
}

void Builder::backward_reduce(RankState& rs, const PipelineAction& a, BackwardPass& b,
                              std::int64_t l) {
  // Syncing once per step, the chunk's reductions follow its last backward (backward_end).
  if (step_sync_ || b.next == b.buckets.size() || b.buckets[b.next].first != l) return;
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  reduce_grads(rs, g, l, b.buckets[b.next].second, cfg_.zero >= 3 || b.last, *rs.last_compute,
               instance(a.microbatch, l, 12), l == first_layer(g));
  ++b.next;
}

void Builder::backward_end(RankState& rs, const PipelineAction& a) {
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  const std::string mbs = std::to_string(a.microbatch);
  if (g == 0) {
    if (sp_)
      tp(rs, CollectiveOp::all_gather, "B" + mbs + ".embed_tp", instance(a.microbatch, -1, 1));
    SegmentCost e = costs_.embedding.dgrad;
    if (!zb_) e += costs_.embedding.wgrad;
    compute(rs, "B" + mbs + ".embed", e, false);
  } else {
    send(rs, a);
  }
  // torch.distributed.pipelining runs FSDP's post-backward for the whole stage after its last
  // backward (stage.py backward_maybe_with_nosync): every bucket's reduction then, in turn.
  if (!step_sync_ || !rs.step_last_backward.contains({a.chunk, a.microbatch})) return;
  if (!zb_)
    for (const auto& [first, count] : grad_buckets(g))
      reduce_grads(rs, g, first, count, true, *rs.last_compute, instance(a.microbatch, first, 12),
                   first == first_layer(g));
  // Its post-backward reshards the weights: the next pipeline step gathers them again.
  const std::int64_t begin = first_layer(g);
  for (std::int64_t l = begin; l < begin + chunk_layers_[static_cast<std::size_t>(g)]; ++l)
    rs.resident.erase(l);
}

std::size_t Builder::emit(RankState& rs) {
  const auto& a = rs.actions[rs.next];
  const std::int64_t g = a.chunk * mesh_.pp + rs.coord.pp;
  const std::int64_t first = first_layer(g), count = chunk_layers_[static_cast<std::size_t>(g)];
  if (a.merged) return emit_merged(rs, a, rs.actions.at(rs.next + 1)) ? 2 : 0;
  if (!input_ready(rs, a)) return 0;
  if (a.pass == PassKind::forward) {
    forward_begin(rs, a);
    for (std::int64_t l = first; l < first + count; ++l) forward_layer(rs, a.microbatch, l, false);
    forward_end(rs, a);
    return 1;
  }
  if (a.pass == PassKind::weight) {
    SegmentCost w;
    for (std::int64_t l = first; l < first + count; ++l)
      for (const auto& c : plan(l).wgrad) w += c;
    if (g == 0) w += costs_.embedding.wgrad;
    if (g == chunks() - 1) w += costs_.head.wgrad;
    const auto id =
        compute(rs, "W" + std::to_string(a.microbatch) + ".c" + std::to_string(g), w, false);
    const bool last = rs.step_last_backward.contains({a.chunk, a.microbatch});
    if (cfg_.zero >= 3) {
      if (mesh_.dense_replicas() > 1)
        reduce_grads(rs, g, first, count, !step_sync_ || last, id, instance(a.microbatch, g, 11),
                     true);
    } else {
      reduce_grads(rs, g, first, count, last, id, instance(a.microbatch, g, 11), true);
    }
    return 1;
  }
  auto b = backward_begin(rs, a);
  for (std::int64_t l = first + count - 1; l >= first; --l) {
    backward_layer(rs, a.microbatch, l, zb_);
    backward_reduce(rs, a, b, l);
  }
  backward_end(rs, a);
  return 1;
}

bool Builder::emit_merged(RankState& rs, const PipelineAction& f, const PipelineAction& b) {
  if (!input_ready(rs, f) || !input_ready(rs, b)) return false;
  // The two passes may run different chunks (the interleaved schedule's pairs).
  const std::int64_t gf = f.chunk * mesh_.pp + rs.coord.pp, gb = b.chunk * mesh_.pp + rs.coord.pp;
  const std::int64_t first_f = first_layer(gf),
                     count_f = chunk_layers_[static_cast<std::size_t>(gf)];
  const std::int64_t first_b = first_layer(gb),
                     count_b = chunk_layers_[static_cast<std::size_t>(gb)];
  // Each pass keeps its own chain (what its next op waits for: its collectives, its last compute
  // op, its layer ends); the compute stream runs their pieces in the order emitted. The backward
  // takes what was pending before the pair, since its piece comes first.
  Chain fc{{}, rs.last_compute, {}}, bc{std::move(rs.pending), rs.last_compute, {}};
  rs.pending.clear();
  const auto on = [&](Chain& c, auto&& body) {
    std::swap(rs.pending, c.pending);
    std::swap(rs.last_compute, c.last_compute);
    std::swap(rs.layer_done, c.layer_done);
    body();
    std::swap(rs.pending, c.pending);
    std::swap(rs.last_compute, c.last_compute);
    std::swap(rs.layer_done, c.layer_done);
  };
  BackwardPass pass;
  on(bc, [&] { pass = backward_begin(rs, b); });
  on(fc, [&] { forward_begin(rs, f); });
  // Layer p of the forward beside layer count − 1 − p of the backward (the ends of the chunk meet
  // in the middle), each cut at its all-to-alls: the backward's combine runs under the forward's
  // attention, the forward's dispatch under the backward's MLP, the backward's dispatch under the
  // forward's MLP and the forward's combine under the backward's attention (the principle of
  // DeepSeek-V3 §3.2.1; assumption, named in the README: not its Figure 4's exact order, and no
  // hand-tuned SM split, the interference model's instead).
  // Chunks of unequal length pair layer for layer from their starts; the longer pass's last
  // layers run alone.
  for (std::int64_t p = 0; p < std::max(count_f, count_b); ++p) {
    const std::int64_t lf = first_f + p, lb = first_b + count_b - 1 - p;
    for (int piece = 0; piece < kLayerPieces; ++piece) {
      if (p < count_b)
        on(bc, [&] {
          backward_layer(rs, b.microbatch, lb, false, piece);
          if (piece == kLayerPieces - 1) backward_reduce(rs, b, pass, lb);
        });
      if (p < count_f) on(fc, [&] { forward_layer(rs, f.microbatch, lf, false, piece); });
    }
  }
  on(bc, [&] { backward_end(rs, b); });
  on(fc, [&] { forward_end(rs, f); });
  // After the pair: the stream's last op, and whatever either pass left pending.
  rs.last_compute = fc.last_compute;
  rs.pending = std::move(bc.pending);
  rs.pending.insert(rs.pending.end(), fc.pending.begin(), fc.pending.end());
  rs.layer_done = std::move(bc.layer_done);
  return true;
}

std::vector<std::int64_t> Builder::split() const {
  const std::int64_t v = virtual_stages(cfg_), G = model_chunks(cfg_);
  if (!opt_.chunk_layers.empty()) {
    check_stage_layers(opt_.chunk_layers, G, m_);
    return opt_.chunk_layers;
  }
  // Each layer's estimated time (a dense first layer of an MoE model its own) and the ends':
  // what a balanced or a tuned split weighs.
  std::vector<double> layer_s(static_cast<std::size_t>(m_.layers), 0.0);
  for (std::int64_t l = 0; l < m_.layers; ++l) {
    const auto& lp = plan(l);
    for (std::size_t i = 0; i < kSegCount; ++i)
      layer_s[static_cast<std::size_t>(l)] +=
          lp.forward[i].time.seconds() + lp.dgrad[i].time.seconds() + lp.wgrad[i].time.seconds();
  }
  const auto end_s = [](const EndCost& e) {
    return e.forward.time.seconds() + e.dgrad.time.seconds() + e.wgrad.time.seconds();
  };
  const auto& split = opt_.stack.pipeline_split;
  // Only an even split has end switches (a framework splitting by parameters has none).
  if (opt_.tune_split && split.end_switches != EndSwitches::none)
    if (auto tuned = tuned_chunk_layers(split, m_, G, v, layer_s, end_s(costs_.embedding),
                                        end_s(costs_.head), opt_.split_fits);
        !tuned.empty())
      return tuned;
  if (auto framework = framework_chunk_layers(split, m_, cfg_); !framework.empty())
    return framework;
  return balanced_chunks(layer_s, G, end_s(costs_.embedding), end_s(costs_.head));
}

double Builder::lower_bound_s(const std::vector<std::int64_t>& chunk_layers) {
  chunk_layers_ = chunk_layers;
  const auto G = static_cast<std::int64_t>(chunk_layers_.size());
  chunk_first_.assign(static_cast<std::size_t>(G), 0);
  for (std::int64_t c = 1; c < G; ++c)
    chunk_first_[static_cast<std::size_t>(c)] = chunk_first_[static_cast<std::size_t>(c - 1)] +
                                                chunk_layers_[static_cast<std::size_t>(c - 1)];
  const auto M = microbatches_per_step(job_, mesh_);
  const double m = static_cast<double>(M);
  const double steps = static_cast<double>(std::max<std::int64_t>(job_.pipeline_steps, 1));
  // Per micro-batch, per global chunk, what its passes take at least: the forward, the backward
  // (the input-gradient part alone on zero-bubble schedules, with a recomputed forward) and the
  // deferred weight-gradient pass (zero-bubble schedules), from the uninterfered times of the ops
  // the trace puts on the compute stream (compute(): time × slowdown, slowdown ≥ 1) or, on the
  // first and last stages, the passes' chains.
  std::vector<double> fwd(static_cast<std::size_t>(G)), bwd(fwd.size()), wgt(fwd.size());
  // Per global chunk, at their prices (the first and last stages' only, as the chains): one
  // micro-batch's ZeRO-3 all-gathers, the step's gradient reductions and the last of them.
  std::vector<double> gathered(fwd.size()), reduced(fwd.size()), reduced_last(fwd.size()),
      reduced_pass(fwd.size());
  // Kernels in a captured CUDA graph follow one another with the graph's gap (compute()): the
  // layers' in either mode, the model's ends in a whole-step graph.
  const double gap_saved = cm_.kernel_gap_s() - cm_.graph_kernel_gap_s();
  const double layer_saved = opt_.stack.cuda_graphs != CudaGraphs::none ? gap_saved : 0.0;
  const double end_saved = opt_.stack.cuda_graphs == CudaGraphs::iteration ? gap_saved : 0.0;
  const auto secs = [](const SegmentCost& c, double saved) {
    return c.time.seconds() - saved * c.kernels;
  };
  for (std::int64_t g = 0; g < G; ++g) {
    double f = 0, d = 0, w = 0, chained_f = 0, chained_b = 0, gathers = 0;
    for (std::int64_t l = first_layer(g);
         l < first_layer(g) + chunk_layers_[static_cast<std::size_t>(g)]; ++l) {
      const auto& p = plan(l);
      double lf = 0, ld = 0, lw = 0;
      for (std::size_t i = 0; i < kSegCount; ++i) {
        lf += secs(p.forward[i], layer_saved);
        ld += secs(p.dgrad[i], layer_saved);
        lw += secs(p.wgrad[i], layer_saved);
      }
      if (cfg_.recompute == Recompute::selective) ld += secs(p.recompute, layer_saved);
      if (checkpointed(l))
        for (const auto& c : p.forward) ld += secs(c, layer_saved);
      const auto stage = g % mesh_.pp;
      // A merging schedule (Schedule::merges()) runs a pass's collectives under the other pass of
      // its pair: only the compute sum bounds it.
      if (chains_ && !cfg_.schedule.merges() &&
          (full_bound_ || stage == 0 || stage == mesh_.pp - 1)) {
        // A pass's chain holds every compute op of the pass (they share a stream) and the
        // collectives between them that the next op waits for: at least the compute sum, up to
        // rounding of the segment times into ops. Every stage's in the full bound, only the first
        // and last stages' in the cheap one: each stage's chains are valid alone, the last
        // stage's usually weigh most (its fill), and pricing every stage's groups for every
        // candidate would cost a search more than the simulations it saves (main job: 3.9
        // against 1.6 CPU-s), while for the candidates that reach a round it pays (Llama 3.1
        // 405B on 16,384 GPUs: 133 -> 100 simulations, 204 -> 134 CPU-s).
        const auto& ch = layer_chains(stage, l);
        const double backward = zb_ ? ld : ld + lw;
        chained_f += std::max(ch.forward.seconds(), lf) - lf;
        chained_b += std::max(ch.backward.seconds(), backward) - backward;
        gathers += ch.gathers.seconds();
      }
      f += lf;
      d += ld;
      w += lw;
    }
    const auto end = [&](const EndCost& e) {
      f += secs(e.forward, end_saved);
      d += secs(e.dgrad, end_saved);
      w += secs(e.wgrad, end_saved);
    };
    if (g == 0) end(costs_.embedding);
    if (g == G - 1) end(costs_.head);
    fwd[static_cast<std::size_t>(g)] = f + chained_f;
    bwd[static_cast<std::size_t>(g)] = d + (zb_ ? 0 : w) + chained_b;
    wgt[static_cast<std::size_t>(g)] = zb_ ? w : 0;
    gathered[static_cast<std::size_t>(g)] = gathers;
    const auto stage = g % mesh_.pp;
    if (full_bound_ && (stage == 0 || stage == mesh_.pp - 1)) {
      const auto red = reductions(stage, g);
      // ZeRO-2 and -3 reduce every micro-batch's gradients, ZeRO-0 and -1 (and a stack syncing
      // once per step) each pipeline step's last one's.
      reduced[static_cast<std::size_t>(g)] =
          (cfg_.zero >= 2 && !step_sync_ ? m : steps) * red.all.seconds();
      reduced_last[static_cast<std::size_t>(g)] = red.last.seconds();
      reduced_pass[static_cast<std::size_t>(g)] = red.all.seconds();
    }
  }
  // The schedule played out at those times (pipeline_schedule.hpp): passes are disjoint spans of
  // a rank's compute stream, and a pass's first op waits for the activation or gradient the
  // other stage sends after its last, so the ends are lower bounds with the schedule's own fill
  // and drain.
  std::vector<std::vector<PipelineAction>> actions;
  try {
    for (std::int64_t r = 0; r < mesh_.pp; ++r)
      actions.push_back(step_actions(cfg_.schedule, mesh_.pp, r, M, job_.pipeline_steps));
  } catch (const Error&) {
    return 0;  // a schedule that cannot run these micro-batches fails its simulation too
  }
  const auto played = play_schedule(actions, M, {fwd, bwd, wgt});
  if (!played) return 0;  // a schedule that deadlocks fails its simulation (build)
  double bound = 0;
  for (std::int64_t r = 0; r < mesh_.pp; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const double end = played->end_s[ru];
    double gathers = 0, reduces = 0;
    for (std::int64_t g = r; g < G; g += mesh_.pp) {
      gathers += (step_gather_ ? steps : m) * gathered[static_cast<std::size_t>(g)];
      reduces += reduced[static_cast<std::size_t>(g)];
    }
    const double optimizer = optimizer_cost(r).time.seconds();
    // The data-parallel streams run their collectives one at a time, none faster than its price,
    // and the optimizer waits for the last reduction: when ZeRO-3's traffic outweighs the
    // compute, the step is at least that long.
    bound = std::max({bound, gathers, reduces + optimizer});
    // The optimizer also waits for the last gradient reduction, which starts after the rank's
    // last pass: after its chunk-first layer in a backward (only the embedding's backward, on
    // chunk 0, runs after that on the compute stream), after the whole weight pass on
    // zero-bubble schedules (which reduce a chunk there). And a last backward's reductions run
    // one at a time from its start on: they end no earlier than its start plus their sum.
    double last_reduction = 0;
    if (full_bound_ && (r == 0 || r == mesh_.pp - 1)) {
      const auto& last = actions[ru].back();
      const std::int64_t g = last.chunk * mesh_.pp + r;
      if (last.pass == PassKind::backward && !zb_) {
        double embedding = 0;
        if (g == 0)
          embedding = costs_.embedding.dgrad.time.seconds() + costs_.embedding.wgrad.time.seconds();
        // Syncing once per step, all of them start after the pass (backward_end).
        last_reduction = step_sync_
                             ? reduced_pass[static_cast<std::size_t>(g)]
                             : std::max(reduced_last[static_cast<std::size_t>(g)] - embedding,
                                        reduced_pass[static_cast<std::size_t>(g)] -
                                            (end - played->last_start_s[ru]));
      } else if (last.pass == PassKind::weight && zb_) {
        last_reduction = reduced_last[static_cast<std::size_t>(g)];
      }
    }
    bound = std::max(bound, end + optimizer + std::max(0.0, last_reduction));
  }
  return bound;
}

SegmentCost Builder::optimizer_cost(std::int64_t stage) const {
  double params = 0;
  for (std::int64_t g = stage; g < chunks(); g += mesh_.pp) {
    for (std::int64_t l = first_layer(g);
         l < first_layer(g) + chunk_layers_[static_cast<std::size_t>(g)]; ++l)
      params +=
          plan(l).dense_params / (cfg_.zero >= 1 ? static_cast<double>(mesh_.shard_group()) : 1.0) +
          plan(l).expert_params /
              (cfg_.zero >= 1 ? static_cast<double>(mesh_.expert_replicas()) : 1.0);
    // The embedding and head are sharded with the rest of the dense state.
    params += end_params(g) / (cfg_.zero >= 1 ? static_cast<double>(mesh_.shard_group()) : 1.0);
  }
  // Adam over the local parameters, and the gradient-norm pass of clipping before it (one read of
  // the local gradients; on by default in every stack: software-stacks.md §3).
  const auto& st = opt_.stack;
  const Kernel adam = memory_kernel(MemoryClass::optimizer, params * st.optimizer_bytes_per_param);
  const Kernel norm = memory_kernel(MemoryClass::optimizer, params * st.grad_norm_bytes_per_param);
  SegmentCost opt;
  opt.time = cm_.stream_time(adam);
  if (st.grad_norm_bytes_per_param > 0) opt.time += cm_.stream_time(norm);
  opt.interfered = opt.time;
  opt.hbm_s = (adam.bytes + norm.bytes) / hbm_achievable_Bps(cm_);
  // Assumption: one launch per pass (a fused multi-tensor kernel); foreach implementations launch
  // one per chunk of tensors, which the profile's per-kernel host time does not see.
  opt.kernels = st.grad_norm_bytes_per_param > 0 ? 2 : 1;
  return opt;
}

Builder::RankState Builder::rank_state(std::int32_t r, bool host_issue) {
  RankState rs;
  rs.rank = r;
  rs.coord = pl_.coord_of(r);
  auto& gph = trace_.graph;
  rs.compute = gph.add_stream(r, StreamKind::compute);
  rs.tp = gph.add_stream(r, StreamKind::tp);
  rs.cp = gph.add_stream(r, StreamKind::cp);
  rs.dp = gph.add_stream(r, StreamKind::dp);
  rs.dpg = gph.add_stream(r, StreamKind::dp_gather);
  rs.ep = gph.add_stream(r, StreamKind::ep);
  rs.pp = gph.add_stream(r, StreamKind::pp);
  if (host_issue) rs.host = gph.add_stream(r, StreamKind::host);
  return rs;
}

void Builder::prepare() {
  sp_ = cfg_.sp && mesh_.tp > 1;
  zb_ = cfg_.schedule.kind == ScheduleKind::zero_bubble;
  compute_costs();
}

Trace Builder::build(const std::vector<std::int32_t>& ranks) {
  prepare();
  const std::int64_t v = virtual_stages(cfg_), G = model_chunks(cfg_);
  chunk_layers_ = split();
  chunk_first_.assign(static_cast<std::size_t>(G), 0);
  for (std::int64_t c = 1; c < G; ++c)
    chunk_first_[static_cast<std::size_t>(c)] = chunk_first_[static_cast<std::size_t>(c - 1)] +
                                                chunk_layers_[static_cast<std::size_t>(c - 1)];
  microbatches_ = microbatches_per_step(job_, mesh_);

  // About 20 ops per layer and pass (compute segments and their collectives); forward and
  // backward, plus a recomputed forward or a weight-gradient pass.
  {
    std::size_t per_rank = 0;
    for (auto c : chunk_layers_) per_rank += static_cast<std::size_t>(c);
    const std::size_t passes = cfg_.recompute == Recompute::full || zb_ ? 3 : 2;
    per_rank = per_rank / static_cast<std::size_t>(mesh_.pp) *
               static_cast<std::size_t>(microbatches_) * passes * 20;
    if (cm_.host_per_kernel_s() > 0) per_rank *= 2;  // a launch op before each op
    const std::size_t estimate =
        std::min<std::size_t>(per_rank * ranks.size() + 1024, std::size_t{1} << 26);
    trace_.graph.reserve(estimate);
    trace_.info.reserve(estimate);
  }
  std::vector<RankState> states;
  for (auto r : ranks) {
    RankState rs = rank_state(r, cm_.host_per_kernel_s() > 0);
    rs.capturing = opt_.stack.cuda_graphs == CudaGraphs::iteration;
    if (opt_.straggler_rank) {
      // Folded: a representative stands for its stage, whose collectives wait for the straggler.
      const bool folded = ranks.size() < static_cast<std::size_t>(pl_.world());
      const auto sc = pl_.coord_of(*opt_.straggler_rank);
      if (r == *opt_.straggler_rank || (folded && sc.pp == rs.coord.pp))
        rs.slow = opt_.straggler_factor;
    }
    rs.actions =
        step_actions(cfg_.schedule, mesh_.pp, rs.coord.pp, microbatches_, job_.pipeline_steps);
    {
      // Per (chunk, pipeline step), the micro-batch of the last backward.
      const std::int64_t per_step = microbatches_ / std::max<std::int64_t>(job_.pipeline_steps, 1);
      std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> last;
      for (const auto& a : rs.actions)
        if (a.pass == PassKind::backward) last[{a.chunk, a.microbatch / per_step}] = a.microbatch;
      for (const auto& [key, mb] : last) rs.step_last_backward.insert({key.first, mb});
    }
    // ZeRO-1/2 (Megatron's distributed optimizer with --overlap-param-gather): each layer's
    // updated weights are all-gathered at the start of the step, before its first forward.
    if (cfg_.zero >= 1 && cfg_.zero <= 2 && mesh_.shard_group() > 1) {
      for (std::int64_t k = 0; k < v; ++k) {
        const std::int64_t gc = k * mesh_.pp + rs.coord.pp;
        for (std::int64_t l = first_layer(gc);
             l < first_layer(gc) + chunk_layers_[static_cast<std::size_t>(gc)]; ++l) {
          // 16-bit weights (kGatheredBytesPerParam), but FP8 parameters' one byte
          // (Stack::fp8_params: Megatron's --fp8-param-gather).
          const double fp8 = opt_.stack.fp8_params ? plan(l).fp8_gathered_params : 0.0;
          const double bytes = gathered_weight_bytes(
              plan(l).dense_params + (l == first_layer(gc) ? end_params(gc) : 0), fp8);
          rs.param_gather[l] = comm(rs, rs.dpg, "params.L" + std::to_string(l), shard_kind(),
                                    CollectiveOp::all_gather, group_of(r, shard_kind()), bytes, {},
                                    instance(-3, l, 0));
        }
      }
    }
    states.push_back(std::move(rs));
  }
  // Emit actions across ranks in an order where every cross-rank dependency (a pipeline send)
  // already exists: a round over ranks, each going as far as it can.
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& rs : states)
      for (std::size_t n = 0; rs.next < rs.actions.size() && (n = emit(rs)) > 0;) {
        rs.next += n;
        progress = true;
      }
  }
  for (const auto& rs : states)
    if (rs.next < rs.actions.size())
      throw Error("", "--schedule",
                  "pipeline schedule deadlocks at rank " + std::to_string(rs.rank));
  // Optimizer step: Adam over this rank's shard, memory-bound: the stack's bytes per local
  // parameter (fused AdamW reads the gradient, fp32 master and two moments, writes them back
  // and the 16-bit weights: 28 B with 16-bit gradients, 30 with fp32 ones).
  for (auto& rs : states) {
    if (rs.last_dp) rs.pending.push_back(*rs.last_dp);
    rs.capturing = false;  // a whole-step graph ends before the optimizer
    const auto id = compute(rs, "optimizer", optimizer_cost(rs.coord.pp), false);
    trace_.info[id.value].kind = "optimizer";
  }
  trace_.ranks = ranks;
  trace_.chunk_layers = chunk_layers_;
  trace_.microbatches = microbatches_;
  return std::move(trace_);
}

// A comm model that is never called: the bound prices compute only.
class NoComm : public CommModel {
 public:
  OpId add(OpGraph&, StreamId, std::string_view, const CommRequest&,
           std::span<const OpId>) override {
    throw Error("", "", "internal: the step-time bound priced a collective");
  }
};

const Builder::LayerChains& Builder::layer_chains(std::int64_t stage, std::int64_t layer) {
  const auto key = std::make_tuple(stage, m_.is_moe_layer(layer), checkpointed(layer), layer == 0,
                                   layer == m_.layers - 1);
  if (auto it = chain_cache_.find(key); it != chain_cache_.end()) return it->second;
  // One micro-batch's passes over the layer on a scratch graph, as the step's trace emits them on
  // this stage's representative (simulate_training's), with its collectives priced by the
  // folded model, each pass from its first compute op to its last.
  LayerChains c;
  RankCoord coord;
  coord.pp = stage;
  const auto rank = static_cast<std::int32_t>(pl_.rank_of(coord));
  const auto pass = [&](auto&& emit_pass) {
    trace_ = Trace{};
    chains_->clear();
    RankState rs = rank_state(rank);
    rs.capturing = opt_.stack.cuda_graphs == CudaGraphs::iteration;  // as build() runs it
    emit_pass(rs);
    const auto& g = trace_.graph;
    const auto& ops = g.stream(rs.compute).ops;
    if (ops.empty()) return Time::zero();
    auto priced = chain_ops(g, ops.front(), ops.back());
    const auto& gathers = full_bound_ ? g.stream(rs.dpg).ops : std::vector<OpId>{};
    priced.insert(priced.end(), gathers.begin(), gathers.end());
    const auto d = chains_->durations(g, priced);
    for (auto id : gathers) c.gathers += d[id.value];
    return longest_chain(g, ops.front(), ops.back(), d);
  };
  // Syncing once per step without reshard (step_gather_), all but a step's first forward find
  // the layer's weights gathered: the chain is theirs (no gather, no copy-out), and a separate
  // pass prices the gathers one forward makes, for the data-parallel bound.
  c.forward = pass([&](RankState& rs) {
    if (step_gather_) rs.resident.insert(layer);
    forward_layer(rs, 0, layer, false);
  });
  if (step_gather_) pass([&](RankState& rs) { forward_layer(rs, 0, layer, false); });
  c.backward = pass([&](RankState& rs) { backward_layer(rs, 0, layer, zb_); });
  trace_ = Trace{};
  return chain_cache_.emplace(key, c).first->second;
}

double Builder::bound_entry(DeferredComm* chains, bool full) {
  chains_ = chains;
  full_bound_ = chains && full;
  prepare();
  const auto chunks = split();  // the given, a tuned, the stack's framework or the balanced split
  double bound = lower_bound_s(chunks);
  // The split simulate_training may run instead (fallback_split).
  if (const auto fallback = fallback_split(m_, cfg_, opt_, chunks);
      !fallback.empty() && fallback != chunks)
    bound = std::min(bound, lower_bound_s(fallback));
  return bound;
}

}  // namespace

std::vector<std::int64_t> fallback_split(const ModelSpec& model, const ParallelConfig& config,
                                         const StrategyOptions& options,
                                         const std::vector<std::int64_t>& chunk_layers) {
  if (!options.chunk_layers.empty() || chunk_layers.size() < 2) return {};
  const auto& split = options.stack.pipeline_split;
  if (split.method == PipelineSplitMethod::balanced)
    return split_layers(model.layers, static_cast<std::int64_t>(chunk_layers.size()));
  if (options.tune_split && !options.split_fits)
    return framework_chunk_layers(split, model, config);
  return {};
}

double step_time_lower_bound(const ModelSpec& model, const TrainingJob& job,
                             const ParallelConfig& config, const ComputeModel& cm,
                             const StrategyOptions& options) {
  if (!model.has_architecture()) return 0;
  const Placement placement(config.mesh);
  NoComm none;
  Builder b(model, job, config, placement, cm, none, options);
  return b.bound_entry(nullptr, false);
}

double step_time_lower_bound(const ModelSpec& model, const TrainingJob& job,
                             const ParallelConfig& config, const Placement& placement,
                             const ComputeModel& cm, FoldedComm& comm,
                             const StrategyOptions& options, BoundLevel level) {
  if (!model.has_architecture()) return 0;
  DeferredComm deferred(comm, level == BoundLevel::unloaded);
  Builder b(model, job, config, placement, cm, deferred, options);
  return b.bound_entry(&deferred, level != BoundLevel::chains);
}

std::vector<std::int64_t> trace_chunk_layers(const ModelSpec& model, const TrainingJob& job,
                                             const ParallelConfig& config, const ComputeModel& cm,
                                             const StrategyOptions& options) {
  if (!model.has_architecture()) return {};
  const Placement placement(config.mesh);
  NoComm none;
  Builder b(model, job, config, placement, cm, none, options);
  return b.split_entry();
}

Trace build_trace(const ModelSpec& model, const TrainingJob& job, const ParallelConfig& config,
                  const Placement& placement, const ComputeModel& cm, CommModel& comm,
                  const StrategyOptions& options, const std::vector<std::int32_t>& ranks) {
  if (!model.has_architecture())
    throw Error(model.file, "",
                "training needs an architecture; '" + model.name +
                    "' is given by its parameter count only");
  Builder b(model, job, config, placement, cm, comm, options);
  return b.build(ranks);
}

}  // namespace meshsim
