#pragma once
// Replays an OpGraph on a simulator: an op starts when it heads its stream, the stream is idle,
// and all its dependencies have finished. Produces per-op start/end times.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "engine/op_graph.hpp"
#include "engine/simulator.hpp"

namespace meshsim {

struct OpTiming {
  Time start = Time::max();
  Time end = Time::max();
  bool finished() const { return end != Time::max(); }
};

struct ReplayResult {
  std::vector<OpTiming> ops;  // indexed by OpId
  Time makespan;
  // Per communication op (indexed by OpId; empty without HBM demands): the time it ran slowed by
  // HBM sharing, weighted by the share it lost, Σ dt·(1 − 1/D) (see ReplayInterference).
  std::vector<float> hbm_wait_ps;
  // Per communication op (indexed by OpId; empty without `late_start`): how long it waited for
  // the SMs a kernel held after it was ready (see ReplayInterference).
  std::vector<float> sm_wait_ps;
};

// Compute/communication interference: while at least one op that holds SMs runs on a rank's
// communication streams, a fixed-duration op on that rank's compute stream progresses at
// 1/slowdown of its rate (the collective's CTAs hold SMs the kernel would use). Its remaining
// work is carried across every change, so an op half-overlapped is slowed for half its time.
// Both vectors are indexed by OpId; slowdown 1 (or an empty vector) leaves an op alone. A
// compute op priced beside one of its rank's communication streams (`priced_beside`, a StreamId
// value: a TP-overlap chunk GEMM priced on the SMs its own reduce-scatter leaves, a bulk-overlap
// GEMM beside its bulk collective) takes `slowdown` while an op that holds SMs runs on another of
// the rank's communication streams only, `own_slowdown` (absent: 1) while one runs on that stream
// only, and `both_slowdown` (absent or 0: `slowdown`) while both do.
//
// HBM sharing: a collective moves HBM bytes as it sends and receives (`hbm_demand`: its traffic
// as a fraction of the achievable HBM bandwidth B); a compute op streams HBM for `hbm_fraction`
// of its time. While the demands on a rank add up past B (f·B + ΣC > B), the kernel's memory
// traffic gets its proportional share, so that part of its time stretches by (f + ΣC/B):
// rate = 1 / (1 + f·max(0, f + ΣC/B − 1)). A fixed-duration collective's traffic gets its
// proportional share too: with D = f + ΣC/B over the rank's running kernel and collectives, it
// progresses at 1/max(1, D) (its copies are all HBM traffic). This is the "shared HBM bandwidth"
// part of the collective's own slowdown (software-stacks.md §2.2, which names it but quantifies
// nothing; the rates are the spec-derived demands, no fitted constant). Assumptions (README):
// proportional sharing (neither side is favoured: NCCL has fewer CTAs but streams without
// compute), demands at the nominal rates even while a collective is slowed by link sharing, and a
// kernel's traffic spread evenly over its time. Collectives priced by a network model
// (asynchronous ops, `--full`) are slowed by that model: `on_hbm` hears every change of a rank's
// D (the full replay scales the flows at that GPU by 1/max(1, D), network/flow_network.hpp).
// Every collective with a demand is charged `hbm_wait_ps` from its rank's D, either way.
//
// Late start (`late_start`): a communication op that holds SMs, ready while a kernel that began
// before it runs on one of its rank's compute streams, starts when that kernel ends: the GPU
// hands out a kernel's thread blocks in launch order and preempts none, and a kernel whose grid
// fills the GPU keeps every SM until its last wave drains (../shared/reference/software-stacks.md
// §2.2: "the collective cannot start its CTAs while a GEMM holds all SMs"). No constant: the
// wait is the rest of that kernel's simulated time. A kernel that starts at the same instant
// does not hold it back (the traces issue a collective before the kernels it overlaps,
// Megatron's launch order), nor does one priced beside the collective's stream (it was planned
// to leave that stream's SMs). Assumptions (README): every compute kernel's grid fills the GPU
// (a kernel of fewer blocks than SMs would leave some free); all of the collective's CTAs start
// together when the kernel ends (a channel whose SM frees early in the last wave gains nothing:
// the collective ends with its last channel); the collective's stream has no higher priority
// (PyTorch's and Megatron's NCCL streams by default; a higher one would wait for the kernel's
// running blocks only).
//
// Link sharing between collectives (the folded replay, whose collectives have fixed prices):
// a fixed-duration communication op with a share key >= 0 progresses, while other such ops run
// on its rank, at rate share(self, others) (the keys of the others; 1: no common link), re-rated
// whenever one starts or ends.
struct ReplayInterference {
  std::vector<float> slowdown;                     // compute ops
  std::vector<bool> holds_sms;                     // communication ops
  std::vector<std::int32_t> priced_beside;         // compute ops; -1 (or absent): none
  std::vector<float> own_slowdown, both_slowdown;  // compute ops priced beside a stream
  std::vector<std::int32_t> share_key;             // communication ops; -1 (or absent): not shared
  std::vector<float> hbm_fraction;                 // compute ops (absent: 0)
  std::vector<float> hbm_demand;                   // communication ops (absent: 0)
  bool late_start = false;
  std::function<double(std::int32_t self, std::vector<std::int32_t> others)> share;
  std::function<void(std::int32_t rank, double demand)> on_hbm;  // D after each change
};

template <class Sim>
class Replay {
 public:
  Replay(const OpGraph& graph, Sim& sim, OpHooks* hooks = nullptr,
         const ReplayInterference* interference = nullptr)
      : g_(graph), sim_(sim), hooks_(hooks), inter_(interference) {}

  // Schedules the graph's first ops at the simulator's current time, runs the simulator to
  // completion, and checks that every op finished. Insertion order is a topological order that
  // respects every stream (dependencies point to earlier ops), so only a model that never
  // completes an asynchronous op can leave one unfinished; that is an Error naming the op.
  // Called with (ops finished, all ops) every `every` finished ops and at the end (the CLI's
  // progress for a --full step of millions of ops).
  void on_progress(std::function<void(std::size_t, std::size_t)> f, std::size_t every) {
    progress_ = std::move(f);
    progress_every_ = std::max<std::size_t>(every, 1);
  }

  ReplayResult run() {
    start_time_ = sim_.now();
    timing_.assign(g_.op_count(), OpTiming{});
    waiting_.resize(g_.op_count());
    for (std::size_t i = 0; i < g_.op_count(); ++i)
      waiting_[i] =
          static_cast<std::uint32_t>(g_.op(OpId{static_cast<std::uint32_t>(i)}).deps.size());
    dependents_ = g_.dependents();
    head_.assign(g_.stream_count(), 0);
    busy_.assign(g_.stream_count(), false);
    if (inter_) {
      // Dense rank indices, and each rank's compute streams.
      rank_of_stream_.assign(g_.stream_count(), 0);
      std::vector<std::int32_t> ranks;
      for (std::uint32_t i = 0; i < g_.stream_count(); ++i)
        ranks.push_back(g_.stream(StreamId{i}).rank);
      std::sort(ranks.begin(), ranks.end());
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
      compute_streams_.assign(ranks.size(), {});
      sharing_.assign(ranks.size(), {});
      comm_active_.assign(ranks.size(), 0);
      holding_.assign(g_.stream_count(), false);
      hbm_load_.assign(ranks.size(), 0.0);
      kernel_hbm_.assign(ranks.size(), 0.0);
      comm_streams_.assign(ranks.size(), {});
      hbm_ops_.assign(ranks.size(), {});
      hbm_since_.assign(ranks.size(), sim_.now());
      rank_ids_ = ranks;
      if (!inter_->hbm_demand.empty()) hbm_wait_ps_.assign(g_.op_count(), 0.0F);
      for (std::uint32_t i = 0; i < g_.stream_count(); ++i) {
        const auto& st = g_.stream(StreamId{i});
        const auto r = static_cast<std::size_t>(
            std::lower_bound(ranks.begin(), ranks.end(), st.rank) - ranks.begin());
        rank_of_stream_[i] = r;
        if (st.kind == StreamKind::host) continue;  // launches: no SMs, no HBM
        (st.kind == StreamKind::compute ? compute_streams_ : comm_streams_)[r].push_back(i);
      }
      running_.assign(g_.stream_count(), Running{});
      if (inter_->late_start) {
        sm_waiters_.assign(g_.stream_count(), {});
        sm_wait_ps_.assign(g_.op_count(), 0.0F);
      }
    }
    for (std::uint32_t s = 0; s < g_.stream_count(); ++s) try_start(StreamId{s});
    sim_.run();
    Time makespan = Time::zero();
    for (std::size_t i = 0; i < timing_.size(); ++i) {
      if (!timing_[i].finished()) {
        const Op op = g_.op(OpId{static_cast<std::uint32_t>(i)});
        throw Error("", "",
                    "op '" + std::string(op.name) + "' on stream '" + g_.stream(op.stream).label +
                        "' never finished");
      }
      if (timing_[i].end - start_time_ > makespan) makespan = timing_[i].end - start_time_;
    }
    return ReplayResult{std::move(timing_), makespan, std::move(hbm_wait_ps_),
                        std::move(sm_wait_ps_)};
  }

 private:
  void try_start(StreamId s) {
    const Stream& st = g_.stream(s);
    if (busy_[s.value] || head_[s.value] >= st.ops.size()) return;
    const OpId id = st.ops[head_[s.value]];
    if (waiting_[id.value] != 0) return;
    if (inter_ && inter_->late_start && holds(id, st) && waits_for_sms(s, id)) return;
    busy_[s.value] = true;
    timing_[id.value].start = sim_.now();
    if (hooks_) hooks_->op_started(g_, id, sim_.now());
    const Op op = g_.op(id);
    if (inter_ && holds(id, st)) change_load(s, +1);
    if (inter_)
      if (const double d = demand(id, st); d > 0) {
        change_hbm(s, d, true);
        if (!hbm_wait_ps_.empty()) hbm_ops_[rank_of_stream_[s.value]].push_back(id.value);
      }
    if (op.start) {
      (*op.start)(id, [this, id] { finish(id); });
    } else if (inter_ && (slowable(id, st) || shares(id, st) || demand(id, st) > 0)) {
      if (st.kind == StreamKind::compute)
        if (const double f = hbm_fraction(id); f > 0) change_hbm(s, f, false);
      auto& run = running_[s.value];
      run = Running{id, static_cast<double>(op.duration.picoseconds()), sim_.now(), 1.0, {}};
      if (shares(id, st)) {
        auto& on_rank = sharing_[rank_of_stream_[s.value]];
        on_rank.push_back(s.value);
        for (auto other : on_rank) refresh(StreamId{other});
      } else {
        reschedule(s);
      }
    } else {
      sim_.schedule_after(op.duration, [this, id] { finish(id); });
    }
  }

  // Late start: whether ready communication op `id` on stream `s` waits for a kernel that holds
  // the SMs (see ReplayInterference); if so, it is started again when that kernel ends. When it
  // starts, charges it the time since it was ready: since its dependencies and the op before it
  // on its stream ended.
  bool waits_for_sms(StreamId s, OpId id) {
    const Time now = sim_.now();
    bool waits = false;
    for (auto cs : compute_streams_[rank_of_stream_[s.value]]) {
      if (!busy_[cs]) continue;
      const OpId kernel = g_.stream(StreamId{cs}).ops[head_[cs]];
      if (timing_[kernel.value].start >= now ||
          beside(kernel) == static_cast<std::int32_t>(s.value))
        continue;
      auto& w = sm_waiters_[cs];
      if (std::find(w.begin(), w.end(), s.value) == w.end()) w.push_back(s.value);
      waits = true;
    }
    if (waits) return true;
    const auto& ops = g_.stream(s).ops;
    Time ready = head_[s.value] > 0 ? timing_[ops[head_[s.value] - 1].value].end : start_time_;
    for (const auto d : g_.op(id).deps) ready = std::max(ready, timing_[d.value].end);
    sm_wait_ps_[id.value] = static_cast<float>((now - ready).picoseconds());
    return false;
  }

  // Interference bookkeeping (only with a ReplayInterference).
  struct Running {
    OpId op{std::numeric_limits<std::uint32_t>::max()};
    double remaining_ps = 0;  // nominal work left
    Time since;               // when `remaining_ps` was last brought up to date
    double rate = 1.0;        // nominal picoseconds done per picosecond
    EventHandle event;
    bool active() const { return op.value != std::numeric_limits<std::uint32_t>::max(); }
  };
  bool holds(OpId id, const Stream& st) const {
    return st.kind != StreamKind::compute && id.value < inter_->holds_sms.size() &&
           inter_->holds_sms[id.value];
  }
  bool slowable(OpId id, const Stream& st) const {
    const auto above_1 = [&](const std::vector<float>& v) {
      return id.value < v.size() && v[id.value] > 1.0F;
    };
    return st.kind == StreamKind::compute &&
           (above_1(inter_->slowdown) || above_1(inter_->own_slowdown) ||
            above_1(inter_->both_slowdown) || hbm_fraction(id) > 0.0);
  }
  double hbm_fraction(OpId id) const {
    return id.value < inter_->hbm_fraction.size() ? inter_->hbm_fraction[id.value] : 0.0;
  }
  double demand(OpId id, const Stream& st) const {
    return st.kind != StreamKind::compute && id.value < inter_->hbm_demand.size()
               ? inter_->hbm_demand[id.value]
               : 0.0;
  }
  bool shares(OpId id, const Stream& st) const {
    return st.kind != StreamKind::compute && inter_->share && id.value < inter_->share_key.size() &&
           inter_->share_key[id.value] >= 0;
  }
  double rate_of(StreamId s) const {
    const auto& run = running_[s.value];
    const auto r = rank_of_stream_[s.value];
    if (g_.stream(s).kind == StreamKind::compute) {
      double rate = 1.0;
      rate /= std::max(1.0, slowdown_now(r, run.op));
      const double f = hbm_fraction(run.op);
      if (f > 0 && hbm_load_[r] > 0) rate /= 1.0 + f * std::max(0.0, f + hbm_load_[r] - 1.0);
      return rate;
    }
    double rate = hbm_share_of(s);
    if (!shares(run.op, g_.stream(s))) return rate;
    std::vector<std::int32_t> others;
    for (auto other : sharing_[r])
      if (other != s.value) others.push_back(inter_->share_key[running_[other].op.value]);
    if (!others.empty()) rate *= inter_->share(inter_->share_key[run.op.value], std::move(others));
    return rate;
  }
  // Compute op `id`'s slowdown on rank r now: by the SM-holding collectives running beside it,
  // its own stream's (priced_beside) apart from the others.
  double slowdown_now(std::size_t r, OpId id) const {
    const std::int32_t own = beside(id);
    const bool own_busy = own >= 0 && holding_[static_cast<std::size_t>(own)];
    const bool other = comm_active_[r] - (own_busy ? 1 : 0) > 0;
    const auto at = [&](const std::vector<float>& v, float absent) {
      return static_cast<double>(id.value < v.size() ? v[id.value] : absent);
    };
    const double plain = at(inter_->slowdown, 1.0F);
    if (!own_busy) return other ? plain : 1.0;
    if (!other) return at(inter_->own_slowdown, 1.0F);
    const double both = at(inter_->both_slowdown, 0.0F);
    return both > 0 ? both : plain;
  }
  std::int32_t beside(OpId id) const {
    return id.value < inter_->priced_beside.size() ? inter_->priced_beside[id.value] : -1;
  }
  // A running collective's HBM share, 1/max(1, D).
  double hbm_share_of(StreamId s) const {
    return demand(running_[s.value].op, g_.stream(s)) > 0
               ? hbm_share(pressure(rank_of_stream_[s.value]))
               : 1.0;
  }
  // D on rank r: the running kernel's HBM fraction and the collectives' demands.
  double pressure(std::size_t r) const { return kernel_hbm_[r] + hbm_load_[r]; }
  static double hbm_share(double d) { return 1.0 / std::max(1.0, d); }
  void reschedule(StreamId s) {
    auto& run = running_[s.value];
    run.rate = rate_of(s);
    run.since = sim_.now();
    const auto left =
        static_cast<std::int64_t>(std::ceil(std::max(0.0, run.remaining_ps) / run.rate));
    const OpId id = run.op;
    run.event = sim_.schedule_after(Time::ps(left), [this, id, s] {
      running_[s.value] = Running{};
      if (shares(id, g_.stream(s))) {
        auto& on_rank = sharing_[rank_of_stream_[s.value]];
        on_rank.erase(std::find(on_rank.begin(), on_rank.end(), s.value));
        for (auto other : on_rank) refresh(StreamId{other});
      }
      finish(id);
    });
  }
  // Brings a running op's remaining work up to now and reschedules it at its current rate.
  void refresh(StreamId s) {
    auto& run = running_[s.value];
    run.remaining_ps -= static_cast<double>((sim_.now() - run.since).picoseconds()) * run.rate;
    sim_.cancel(run.event);
    reschedule(s);
  }
  // The running kernel's HBM fraction on a compute stream starts (+f) or ends (−f), or a
  // collective's demand (`collective`): charges the collectives in flight their wait at the old D,
  // updates D, re-times the running ops whose rate it moved (most demands still fit) and tells
  // `on_hbm`.
  void change_hbm(StreamId s, double delta, bool collective) {
    const auto r = rank_of_stream_[s.value];
    const double before = pressure(r);
    charge_hbm_wait(r, before);
    double& load = collective ? hbm_load_[r] : kernel_hbm_[r];
    load = std::max(0.0, load + delta);
    if (load < 1e-12) load = 0;  // no drift once everything has ended
    // A kernel's rate reads the collectives' demands only (its own f is fixed).
    if (collective)
      for (auto cs : compute_streams_[r])
        if (cs != s.value && running_[cs].active() && rate_of(StreamId{cs}) != running_[cs].rate)
          refresh(StreamId{cs});
    // Every collective with a demand on the rank has the same HBM share: re-time them when it
    // moved (link sharing re-rates on its own).
    if (hbm_share(before) != hbm_share(pressure(r)))
      for (auto cs : comm_streams_[r])
        if (cs != s.value && running_[cs].active() &&
            demand(running_[cs].op, g_.stream(StreamId{cs})) > 0)
          refresh(StreamId{cs});
    if (inter_->on_hbm) inter_->on_hbm(rank_ids_[r], pressure(r));
  }
  // The collectives with a demand in flight on rank r lost 1 − 1/max(1, D) of the time since D
  // last changed.
  void charge_hbm_wait(std::size_t r, double d) {
    const Time now = sim_.now();
    if (const double lost = 1.0 - hbm_share(d); lost > 0 && !hbm_ops_[r].empty())
      for (auto op : hbm_ops_[r])
        hbm_wait_ps_[op] +=
            static_cast<float>(static_cast<double>((now - hbm_since_[r]).picoseconds()) * lost);
    hbm_since_[r] = now;
  }
  void change_load(StreamId comm_stream, int delta) {
    const auto r = rank_of_stream_[comm_stream.value];
    const int before = comm_active_[r];
    comm_active_[r] += delta;
    holding_[comm_stream.value] = delta > 0;
    // A plain op's rate changes only at 0 ↔ 1; one priced beside a stream when its own count of
    // the others does.
    const bool crossed = (before > 0) != (comm_active_[r] > 0);
    for (auto cs : compute_streams_[r])
      if (running_[cs].active() &&
          (beside(running_[cs].op) >= 0 ? rate_of(StreamId{cs}) != running_[cs].rate : crossed))
        refresh(StreamId{cs});
  }

  void finish(OpId id) {
    if (timing_[id.value].finished()) throw std::logic_error("op finished twice");
    timing_[id.value].end = sim_.now();
    if (progress_ && (++finished_ % progress_every_ == 0 || finished_ == g_.op_count()))
      progress_(finished_, g_.op_count());
    if (hooks_) hooks_->op_finished(g_, id, sim_.now());
    const Op op = g_.op(id);
    if (inter_ && holds(id, g_.stream(op.stream))) change_load(op.stream, -1);
    if (inter_)
      if (const double d = demand(id, g_.stream(op.stream)); d > 0) {
        change_hbm(op.stream, -d, true);  // charges this op's wait too
        if (!hbm_wait_ps_.empty()) {
          auto& v = hbm_ops_[rank_of_stream_[op.stream.value]];
          v.erase(std::find(v.begin(), v.end(), id.value));
        }
      }
    if (inter_ && !op.start && g_.stream(op.stream).kind == StreamKind::compute)
      if (const double f = hbm_fraction(id); f > 0) change_hbm(op.stream, -f, false);
    busy_[op.stream.value] = false;
    ++head_[op.stream.value];
    // Collectives that waited for this kernel's SMs start before anything it releases.
    if (!sm_waiters_.empty() && !sm_waiters_[op.stream.value].empty()) {
      const auto waiters = std::move(sm_waiters_[op.stream.value]);
      sm_waiters_[op.stream.value].clear();
      for (auto w : waiters) try_start(StreamId{w});
    }
    for (auto k = dependents_.begin[id.value]; k < dependents_.begin[id.value + 1]; ++k) {
      const OpId d = dependents_.ops[k];
      --waiting_[d.value];
      if (waiting_[d.value] == 0) try_start(g_.op(d).stream);
    }
    try_start(op.stream);
  }

  const OpGraph& g_;
  Sim& sim_;
  OpHooks* hooks_;
  std::function<void(std::size_t, std::size_t)> progress_;
  std::size_t progress_every_ = 1, finished_ = 0;
  Time start_time_;
  std::vector<OpTiming> timing_;
  std::vector<std::uint32_t> waiting_;
  OpGraph::Dependents dependents_;
  std::vector<std::size_t> head_;
  std::vector<bool> busy_;
  const ReplayInterference* inter_ = nullptr;
  std::vector<std::size_t> rank_of_stream_;
  std::vector<std::vector<std::uint32_t>> compute_streams_;
  std::vector<std::vector<std::uint32_t>> sharing_;  // per rank: streams running a shared op
  std::vector<int> comm_active_;
  std::vector<bool> holding_;       // per stream: an SM-holding communication op runs on it
  std::vector<double> hbm_load_;    // per rank: Σ hbm_demand of the collectives running
  std::vector<double> kernel_hbm_;  // per rank: hbm_fraction of the kernel running
  std::vector<std::vector<std::uint32_t>> comm_streams_;
  std::vector<float> hbm_wait_ps_;                   // per op
  std::vector<std::vector<std::uint32_t>> hbm_ops_;  // per rank: collectives with a demand
  std::vector<Time> hbm_since_;                      // per rank: when D last changed
  std::vector<std::int32_t> rank_ids_;               // dense rank index → rank
  std::vector<Running> running_;
  std::vector<std::vector<std::uint32_t>> sm_waiters_;  // per compute stream: comm streams
  std::vector<float> sm_wait_ps_;                       // per op
};

}  // namespace meshsim
