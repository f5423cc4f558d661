#include "serving/serving_sim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/units.hpp"
#include "engine/simulator.hpp"
#include "network/flow_network.hpp"
#include "network/link_usage.hpp"
#include "parallel/parallel_config.hpp"

namespace meshsim {
namespace {

// Decimated time series: every `stride_`-th sample, the stride doubling whenever the series
// would exceed kMax points, so a long run keeps a bounded, evenly thinned curve.
class Series {
 public:
  void add(const ServingSample& v) {
    last_ = v;
    kept_last_ = n_++ % stride_ == 0;
    if (kept_last_) points_.push_back(v);
    if (points_.size() > kMax) {
      std::vector<ServingSample> kept;
      for (std::size_t i = 0; i < points_.size(); i += 2) kept.push_back(points_[i]);
      points_ = std::move(kept);
      stride_ *= 2;
    }
  }
  // The kept samples and the latest one (the state at the end of the run).
  std::vector<ServingSample> take() {
    if (n_ > 0 && !kept_last_) points_.push_back(last_);
    return std::move(points_);
  }

 private:
  static constexpr std::size_t kMax = 2048;
  std::vector<ServingSample> points_;
  ServingSample last_;
  bool kept_last_ = false;
  std::uint64_t n_ = 0, stride_ = 1;
};

class Cluster {
 public:
  Cluster(const Topology& topo, const ModelSpec& model, const ServingSetup& setup,
          const std::vector<Request>& requests, CommContext& comm)
      : topo_(topo),
        model_(model),
        setup_(setup),
        requests_(requests),
        comm_(comm),
        compute_(topo.gpu, setup.profile),
        capacity_(kv_capacity(topo, model, setup)) {
    const auto total = setup.total_replicas();
    SchedulerOptions sched = setup.scheduler;
    sched.speculative_tokens = setup.speculative.enabled() ? setup.speculative.tokens : 0;
    block_bytes_ = capacity_.kv_bytes_per_token_rank * as_double(capacity_.block_size);
    if (sched.preemption == Preemption::swap) {
      // Each GPU copies its shard of a block over its own host link, PCIe or NVLink-C2C (an
      // assumption: the copy engines reach the link's rate, and GPUs sharing a PCIe switch or a
      // Grace CPU do not slow each other).
      host_Bps_ = topo.gpus().empty() ? 0.0 : host_link_Bps_of(topo, topo.gpus().front());
      if (!(host_Bps_ > 0))
        throw Error(topo.name, "",
                    "swap preemption needs a PCIe or NVLink-C2C link from GPU 0 to its host");
      sched.swap_blocks =
          static_cast<std::int64_t>(std::floor(sched.swap_space_bytes / block_bytes_));
    }
    for (std::int64_t i = 0; i < total; ++i) {
      auto rep = std::make_unique<Replica>(sched, capacity_.blocks);
      rep->gpus = replica_gpus(setup.shape, i);
      rep->cost = std::make_unique<StepCost>(topo, model, setup.shape, rep->gpus, compute_, comm);
      rep->cost->set_cuda_graph_sizes(setup.scheduler.cuda_graph_sizes);
      if (setup.speculative.enabled())
        rep->draft = std::make_unique<DraftCost>(topo, setup.speculative, setup.shape, rep->gpus,
                                                 compute_, comm, *rep->cost);
      rep->stage_busy.assign(static_cast<std::size_t>(setup.shape.pp), false);
      rep->stage_queue.resize(static_cast<std::size_t>(setup.shape.pp));
      if (setup.disaggregated()) {
        rep->prefill_only = i < setup.prefill_replicas;
        (rep->prefill_only ? prefill_pool_ : decode_pool_).push_back(i);
      } else {
        prefill_pool_.push_back(i);
      }
      replicas_.push_back(std::move(rep));
    }
    if (setup.disaggregated()) net_ = std::make_unique<FlowNetwork>(topo, sim_);
    transfer_held_.assign(static_cast<std::size_t>(total), 0);
  }

  ServingResult run() {
    reqs_.resize(requests_.size());
    const bool closed = setup_.clients > 0;
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      auto& r = reqs_[i];
      r.prompt = requests_[i].prompt_tokens;
      r.output = requests_[i].output_tokens;
      r.prefix_group = requests_[i].prefix_group;
      r.prefix_tokens = requests_[i].prefix_tokens;
      r.arrival = closed ? Time{} : requests_[i].arrival;
      if (closed) continue;
      const auto id = static_cast<std::int32_t>(i);
      sim_.schedule_at(requests_[i].arrival, [this, id] { arrive(id); });
    }
    if (closed) {
      next_issue_ = std::min<std::size_t>(static_cast<std::size_t>(setup_.clients), reqs_.size());
      for (std::size_t i = 0; i < next_issue_; ++i) {
        const auto id = static_cast<std::int32_t>(i);
        sim_.schedule_at(Time{}, [this, id] { arrive(id); });
      }
    }
    sim_.run();
    if (completed_ + rejected_ != static_cast<std::int64_t>(reqs_.size()))
      throw std::logic_error(fmt::format(
          "serving simulation stalled with {} of {} requests unfinished",
          static_cast<std::int64_t>(reqs_.size()) - completed_ - rejected_, reqs_.size()));
    return finish();
  }

 private:
  struct Replica {
    Replica(SchedulerOptions o, std::int64_t blocks) : sched(o, blocks) {}
    ReplicaScheduler sched;
    std::vector<std::int32_t> gpus;
    std::unique_ptr<StepCost> cost;
    std::unique_ptr<DraftCost> draft;  // speculative decoding's proposer
    bool prefill_only = false;
    std::vector<bool> stage_busy;
    std::vector<std::deque<std::uint32_t>> stage_queue;
    std::int64_t last_batch = 0;  // sequences in the latest iteration formed (0 when idle)
    std::int64_t inflight = 0, outstanding = 0;
    double outstanding_tokens = 0;  // forward tokens still to compute for its requests
    std::deque<std::int32_t> pending_adopt;
  };

  std::int64_t pick(const std::vector<std::int64_t>& pool) {
    switch (setup_.router) {
      case RouterPolicy::round_robin:
        return pool[static_cast<std::size_t>(rr_++ % pool.size())];
      case RouterPolicy::least_outstanding:
        return *std::min_element(pool.begin(), pool.end(), [&](auto a, auto b) {
          return rep(a).outstanding < rep(b).outstanding;
        });
      case RouterPolicy::jsq_tokens:
        return *std::min_element(pool.begin(), pool.end(), [&](auto a, auto b) {
          return rep(a).outstanding_tokens < rep(b).outstanding_tokens;
        });
    }
    return pool.front();
  }
  Replica& rep(std::int64_t i) { return *replicas_[static_cast<std::size_t>(i)]; }
  RequestState& req(std::int32_t id) { return reqs_[static_cast<std::size_t>(id)]; }

  void change_in_system(int delta) {
    const double now = sim_.now().seconds();
    in_system_area_ += as_double(in_system_) * (now - last_change_s_);
    last_change_s_ = now;
    in_system_ += delta;
    peak_in_system_ = std::max(peak_in_system_, in_system_);
  }

  // Closed loop: the client whose request just left the system sends the next one after its
  // think time.
  void client_done() {
    if (setup_.clients <= 0 || next_issue_ >= reqs_.size()) return;
    const auto id = static_cast<std::int32_t>(next_issue_++);
    double think = setup_.think_time_s;
    if (setup_.think_exponential)
      think = -setup_.think_time_s * std::log1p(-think_rng_.uniform01());
    const Time at = sim_.now() + Time::from_seconds_ceil(think);
    req(id).arrival = at;
    sim_.schedule_at(at, [this, id] { arrive(id); });
  }

  void sample_kv() {
    std::int64_t used = 0, total = 0, running = 0, waiting = 0, batch = 0;
    for (const auto& r : replicas_) {
      used += r->sched.blocks_in_use();
      total += r->sched.pool().total();
      running += static_cast<std::int64_t>(r->sched.running().size());
      waiting += static_cast<std::int64_t>(r->sched.waiting().size() + r->sched.swapped().size());
      batch += r->last_batch;
    }
    const double now = sim_.now().seconds(), u = total > 0 ? as_double(used) / as_double(total) : 0;
    kv_area_ += kv_last_ * (now - kv_last_t_);
    kv_last_ = u;
    kv_last_t_ = now;
    kv_peak_ = std::max(kv_peak_, u);
    kv_series_.add({.t_s = now,
                    .kv_used = u,
                    .batch_sequences =
                        replicas_.empty() ? 0.0 : as_double(batch) / as_double(replicas_.size()),
                    .running = running,
                    .waiting = waiting,
                    .output_tokens = output_tokens_});
  }

  void arrive(std::int32_t id) {
    auto& r = req(id);
    ++arrived_;
    change_in_system(+1);
    const auto cap = capacity_.tokens();
    const bool too_long = r.prompt + r.output - 1 > cap ||
                          (model_.max_positions > 0 && r.prompt + r.output > model_.max_positions);
    if (too_long) {
      ++rejected_;
      change_in_system(-1);
      client_done();
      check();
      return;
    }
    const auto target = pick(prefill_pool_);
    r.replica = static_cast<std::int32_t>(target);
    auto& p = rep(target);
    ++p.outstanding;
    p.outstanding_tokens += as_double(r.prompt + r.output - 1);
    p.sched.enqueue(id);
    try_schedule(target);
    check();
  }

  void try_schedule(std::int64_t i) {
    auto& p = rep(i);
    if (p.inflight >= setup_.shape.pp || p.stage_busy[0] || !p.stage_queue[0].empty()) return;
    Batch b = p.sched.form_batch(reqs_);
    preemptions_ += b.preempted;
    swapped_out_blocks_ += b.swapped_out_blocks;
    swapped_in_blocks_ += b.swapped_in_blocks;
    p.outstanding_tokens += as_double(b.recomputed_tokens);
    if (b.entries.empty()) {
      if (p.sched.has_runnable(reqs_)) ++idle_with_work_;
      if (p.inflight == 0) p.last_batch = 0;  // idle
      return;
    }
    p.last_batch = static_cast<std::int64_t>(b.entries.size());
    for (const auto& e : b.entries) {
      auto& r = req(e.request);
      if (!r.scheduled) {
        r.scheduled = true;
        r.first_scheduled = sim_.now();
      }
    }
    sample_kv();
    ++p.inflight;
    std::uint32_t slot;
    if (!free_batches_.empty()) {
      slot = free_batches_.back();
      free_batches_.pop_back();
      batches_[slot] = std::move(b);
    } else {
      slot = static_cast<std::uint32_t>(batches_.size());
      batches_.push_back(std::move(b));
    }
    arrive_stage(i, slot, 0);
  }

  void arrive_stage(std::int64_t i, std::uint32_t slot, std::int64_t s) {
    rep(i).stage_queue[static_cast<std::size_t>(s)].push_back(slot);
    start_stage(i, s);
  }

  void start_stage(std::int64_t i, std::int64_t s) {
    auto& p = rep(i);
    const auto si = static_cast<std::size_t>(s);
    if (p.stage_busy[si] || p.stage_queue[si].empty()) return;
    const auto slot = p.stage_queue[si].front();
    p.stage_queue[si].pop_front();
    p.stage_busy[si] = true;
    // The engine's host work for the iteration (scheduling, inputs, sampling, outputs) runs
    // before the first stage, serial with the GPU.
    const auto& batch = batches_[slot];
    // A speculative proposer drafts before the target verifies (one stage: pp = 1).
    const double dt =
        p.cost->stage_seconds(s, batch.shape) +
        (s == 0 ? setup_.scheduler.cpu_seconds(static_cast<std::int64_t>(batch.entries.size()),
                                               setup_.shape.gpus()) +
                      (p.draft ? p.draft->seconds(batch.shape) : 0.0) +
                      swap_seconds(batch.swapped_out_blocks + batch.swapped_in_blocks)
                : 0.0);
    const double start = sim_.now().seconds();
    sim_.schedule_after(Time::from_seconds_ceil(dt),
                        [this, i, s, slot, start] { end_stage(i, s, slot, start); });
  }

  // Copying `blocks` KV blocks to or from the host, per GPU (before the iteration's model runs).
  double swap_seconds(std::int64_t blocks) const {
    return blocks > 0 ? as_double(blocks) * block_bytes_ / host_Bps_ : 0.0;
  }

  void end_stage(std::int64_t i, std::int64_t s, std::uint32_t slot, double start) {
    auto& p = rep(i);
    if (setup_.record_iterations) {
      const auto& shape = batches_[slot].shape;
      std::int64_t pre = 0;
      for (const auto& c : shape.prefill) pre += c.tokens;
      iteration_log_.push_back(IterationRecord{
          .replica = static_cast<std::int32_t>(i),
          .stage = static_cast<std::int32_t>(s),
          .start_s = start,
          .end_s = sim_.now().seconds(),
          .prefill_tokens = pre,
          .decodes = shape.decodes,
          .kv_used = p.sched.pool().total() > 0
                         ? as_double(p.sched.blocks_in_use()) / as_double(p.sched.pool().total())
                         : 0.0});
    }
    p.stage_busy[static_cast<std::size_t>(s)] = false;
    if (s + 1 < setup_.shape.pp) {
      const double send = p.cost->send_seconds(s, batches_[slot].shape.tokens());
      sim_.schedule_after(Time::from_seconds_ceil(send),
                          [this, i, s, slot] { arrive_stage(i, slot, s + 1); });
    } else {
      complete_batch(i, slot);
    }
    start_stage(i, s);
    if (s == 0) try_schedule(i);
    check();
  }

  void complete_batch(std::int64_t i, std::uint32_t slot) {
    auto& p = rep(i);
    --p.inflight;
    ++iterations_;
    Batch b = std::move(batches_[slot]);
    free_batches_.push_back(slot);
    for (const auto& e : b.entries) {
      auto& r = req(e.request);
      r.in_flight = false;
      const auto before = r.computed;
      // A decode that verified drafts keeps the accepted ones and the target's own next token.
      std::int64_t done = e.tokens, emitted = 1;
      if (e.decode && e.tokens > 1) {
        const auto accepted =
            accepted_drafts(accept_rng_, setup_.speculative.acceptance, e.tokens - 1);
        done = emitted = accepted + 1;
        ++spec_.steps;
        spec_.proposed += e.tokens - 1;
        spec_.accepted += accepted;
        spec_.emitted += emitted;
      }
      r.computed += done;
      p.sched.computed(reqs_, e.request, before);
      p.outstanding_tokens -= as_double(done);
      if (r.computed >= r.known()) token(i, e.request, emitted);
    }
    sample_kv();
    try_schedule(i);
    if (setup_.disaggregated() && !p.prefill_only) try_adopt(i);
  }

  // `count` tokens of request `id` arrive together (more than one after a verify step: one
  // inter-token gap, as a streaming client sees the chunk).
  void token(std::int64_t i, std::int32_t id, std::int64_t count = 1) {
    auto& r = req(id);
    auto& p = rep(i);
    const Time now = sim_.now();
    r.generated += count;
    output_tokens_ += count;
    if (r.generated == count)
      r.first_token = now;
    else
      itl_.add((now - r.last_token).seconds());
    r.last_token = now;
    if (r.generated == r.output) {
      r.finished = now;
      p.sched.finish(reqs_, id);
      --p.outstanding;
      ++completed_;
      last_finish_ = now;
      change_in_system(-1);
      client_done();
      if (setup_.progress) setup_.progress(static_cast<std::size_t>(completed_), reqs_.size());
    } else if (p.prefill_only) {
      hand_off(i, id);
    }
  }

  // Disaggregated: the prompt's KV cache moves from the prefill replica to a decode replica.
  void hand_off(std::int64_t from, std::int32_t id) {
    auto& r = req(id);
    r.in_flight = true;  // neither replica may schedule it until the cache has arrived
    const auto to = pick(decode_pool_);
    auto& q = rep(to);
    ++q.outstanding;
    q.outstanding_tokens += as_double(r.output - r.generated);
    auto& p = rep(from);
    --p.outstanding;
    p.outstanding_tokens -= as_double(r.output - r.generated);
    q.pending_adopt.push_back(id);
    try_adopt(to);
  }

  void try_adopt(std::int64_t to) {
    auto& q = rep(to);
    while (!q.pending_adopt.empty()) {
      const auto id = q.pending_adopt.front();
      auto& r = req(id);
      if (!q.sched.can_adopt(r.computed + 1)) return;
      q.pending_adopt.pop_front();
      const auto from = static_cast<std::int64_t>(r.replica);
      // The prefill replica keeps the blocks until the transfer is done: its private ones are
      // counted in transfer, its cached prefix blocks stay held in its cache.
      const auto held = r.private_blocks();
      transfer_held_[static_cast<std::size_t>(from)] += held;
      transfer_shared_[id] = std::exchange(r.shared, {});
      r.blocks = 0;
      q.sched.reserve(reqs_, id, r.computed + 1);
      q.sched.adopt(id);
      r.replica = static_cast<std::int32_t>(to);
      start_transfer(from, to, id, held);
    }
  }

  void start_transfer(std::int64_t from, std::int64_t to, std::int32_t id, std::int64_t held) {
    auto& r = req(id);
    const auto& p = rep(from);
    const auto& q = rep(to);
    const auto& shape = setup_.shape;
    const auto layers = split_layers(model_.layers, shape.pp);
    const double per_layer = capacity_.kv_bytes_per_token_rank /
                             as_double(*std::max_element(layers.begin(), layers.end()));
    std::vector<FlowNetwork::FlowRequest> flows;
    auto remaining = std::make_shared<std::int64_t>(shape.gpus());
    Time latency;
    const Time t0 = sim_.now();
    for (std::int64_t s = 0; s < shape.pp; ++s)
      for (std::int64_t j = 0; j < shape.tp; ++j) {
        const auto k = static_cast<std::size_t>(s * shape.tp + j);
        const auto& route = comm_.router.gpu_route(p.gpus[k], q.gpus[k]);
        for (const auto& path : route.paths) latency = std::max(latency, path.latency);
        const double bytes =
            as_double(r.computed) * per_layer * as_double(layers[static_cast<std::size_t>(s)]);
        kv_transfer_bytes_ += bytes;
        flows.push_back(FlowNetwork::FlowRequest{.links = usage_of(route.paths),
                                                 .bytes = bytes,
                                                 .done = [this, remaining, from, to, id, held, t0] {
                                                   if (--*remaining == 0)
                                                     transfer_done(from, to, id, held, t0);
                                                 }});
      }
    // The last byte lands one path latency after it left.
    for (auto& f : flows) {
      auto done = std::move(f.done);
      f.done = [this, latency, done = std::move(done)] { sim_.schedule_after(latency, done); };
    }
    net_->transfer_batch(std::move(flows));
  }

  void transfer_done(std::int64_t from, std::int64_t to, std::int32_t id, std::int64_t held,
                     Time t0) {
    auto& r = req(id);
    const auto shared = transfer_shared_.extract(id);
    rep(from).sched.hand_off(id, held, r.prefix_group, shared.mapped());
    transfer_held_[static_cast<std::size_t>(from)] -= held;
    r.in_flight = false;
    kv_transfer_samples_.push_back((sim_.now() - t0).seconds());
    sample_kv();
    try_schedule(from);
    try_schedule(to);
    check();
  }

  void check() {
    if (!setup_.check_invariants) return;
    if (sim_.now() < last_check_) throw std::logic_error("serving clock went back");
    last_check_ = sim_.now();
    if (arrived_ != completed_ + rejected_ + in_system_)
      throw std::logic_error(
          fmt::format("requests not conserved: {} arrived, {} completed, {} "
                      "rejected, {} in the system",
                      arrived_, completed_, rejected_, in_system_));
    std::vector<std::int64_t> held(replicas_.size(), 0);
    for (const auto& r : reqs_)
      if (r.replica >= 0) held[static_cast<std::size_t>(r.replica)] += r.private_blocks();
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      const auto& pool = replicas_[i]->sched.pool();
      const auto cached = replicas_[i]->sched.cache().size();
      const auto& sch = replicas_[i]->sched;
      if (sch.swap_used() < 0 || sch.swap_used() > sch.options().swap_blocks)
        throw std::logic_error(fmt::format("swap space not conserved on replica {}", i));
      if (pool.used() != held[i] + transfer_held_[i] + cached || pool.free() < 0 ||
          pool.used() > pool.total())
        throw std::logic_error(
            fmt::format("KV blocks not conserved on replica {}: {} used, {} held by requests, {} "
                        "in transfer, {} cached",
                        i, pool.used(), held[i], transfer_held_[i], cached));
    }
  }

  ServingResult finish() {
    ServingResult out;
    change_in_system(0);
    sample_kv();
    const double first = requests_.empty() ? 0 : requests_.front().arrival.seconds();
    out.makespan_s = std::max(0.0, last_finish_.seconds() - first);
    out.arrived = arrived_;
    out.completed = completed_;
    out.rejected = rejected_;
    out.preemptions = preemptions_;
    out.swapped_out_blocks = swapped_out_blocks_;
    out.swapped_in_blocks = swapped_in_blocks_;
    out.swap_seconds = swap_seconds(swapped_out_blocks_ + swapped_in_blocks_);
    out.iterations = iterations_;
    out.output_tokens = output_tokens_;
    out.capacity = capacity_;
    out.gpus = setup_.total_replicas() * setup_.shape.gpus();
    std::vector<double> ttft, tpot, e2e, delay;
    std::int64_t good = 0;
    out.peak_in_system = peak_in_system_;
    out.warmup_requests =
        setup_.clients > 0
            ? std::min<std::int64_t>(setup_.clients, static_cast<std::int64_t>(reqs_.size()))
            : 0;
    for (std::size_t i = 0; i < reqs_.size(); ++i) {
      const auto& r = reqs_[i];
      if (r.generated < r.output || r.output == 0) continue;
      const double t = (r.first_token - r.arrival).seconds();
      const double e = (r.finished - r.arrival).seconds();
      double tp = r.output > 1 ? (e - t) / as_double(r.output - 1) : 0.0;
      if (static_cast<std::int64_t>(i) >= out.warmup_requests) {
        ttft.push_back(t);
        e2e.push_back(e);
        delay.push_back((r.first_scheduled - r.arrival).seconds());
        if (r.output > 1) tpot.push_back(tp);
      }
      const bool ok = (setup_.slo_ttft_s <= 0 || t <= setup_.slo_ttft_s) &&
                      (setup_.slo_tpot_s <= 0 || tp <= setup_.slo_tpot_s);
      good += ok ? 1 : 0;
    }
    if (setup_.scheduler.prefix_caching) {
      auto& pc = out.prefix_cache;
      pc.enabled = true;
      for (const auto& rp : replicas_) {
        pc.queried_tokens += rp->sched.prefix_queried_tokens();
        pc.hit_tokens += rp->sched.prefix_hit_tokens();
      }
      pc.hit_rate =
          pc.queried_tokens > 0 ? as_double(pc.hit_tokens) / as_double(pc.queried_tokens) : 0.0;
      std::vector<double> hit, miss;
      for (std::size_t i = static_cast<std::size_t>(out.warmup_requests); i < reqs_.size(); ++i) {
        const auto& r = reqs_[i];
        if (r.generated < r.output || r.output == 0 || r.prefix_group < 0) continue;
        (r.first_cached_tokens > 0 ? hit : miss).push_back((r.first_token - r.arrival).seconds());
      }
      pc.hit_requests = static_cast<std::int64_t>(hit.size());
      pc.miss_requests = static_cast<std::int64_t>(miss.size());
      pc.ttft_hit = summarize(hit);
      pc.ttft_miss = summarize(miss);
    }
    if (setup_.speculative.enabled()) {
      out.speculative = spec_;
      out.speculative.enabled = true;
      out.speculative.acceptance_rate =
          spec_.proposed > 0 ? as_double(spec_.accepted) / as_double(spec_.proposed) : 0.0;
      out.speculative.tokens_per_step =
          spec_.steps > 0 ? as_double(spec_.emitted) / as_double(spec_.steps) : 0.0;
      out.speculative.expected_tokens_per_step = setup_.speculative.expected_tokens_per_step();
    }
    out.ttft = summarize(ttft);
    out.tpot = summarize(tpot);
    out.e2e = summarize(e2e);
    out.scheduling_delay = summarize(delay);
    out.itl = itl_.summary();
    out.kv_transfer = summarize(kv_transfer_samples_);
    out.kv_transfer_bytes = kv_transfer_bytes_;
    for (auto* v : {&ttft, &tpot, &e2e}) std::sort(v->begin(), v->end());
    out.ttft_samples = std::move(ttft);
    out.tpot_samples = std::move(tpot);
    out.e2e_samples = std::move(e2e);
    if (out.makespan_s > 0) {
      out.requests_per_s = as_double(completed_) / out.makespan_s;
      out.output_tokens_per_s = as_double(output_tokens_) / out.makespan_s;
      out.tokens_per_s_per_gpu = out.output_tokens_per_s / as_double(out.gpus);
      out.goodput_requests_per_s = as_double(good) / out.makespan_s;
      out.mean_in_system = in_system_area_ / (last_change_s_ - first);
      out.kv_utilization_mean = kv_area_ / (kv_last_t_ - first);
    }
    out.kv_utilization_peak = kv_peak_;
    out.timeline = kv_series_.take();
    out.itl_cdf = itl_.cdf(200);
    {
      std::vector<std::size_t> measured;
      for (std::size_t i = static_cast<std::size_t>(out.warmup_requests); i < reqs_.size(); ++i)
        if (reqs_[i].generated >= reqs_[i].output && reqs_[i].output > 0) measured.push_back(i);
      const std::size_t stride =
          (measured.size() + ServingResult::kMaxPromptPoints - 1) / ServingResult::kMaxPromptPoints;
      for (std::size_t k = 0; k < measured.size(); k += std::max<std::size_t>(stride, 1)) {
        const auto& r = reqs_[measured[k]];
        out.ttft_by_prompt.emplace_back(r.prompt, (r.first_token - r.arrival).seconds());
      }
    }
    out.iteration_log = std::move(iteration_log_);
    if (setup_.record_iterations && reqs_.size() <= kMaxRequestLog)
      for (std::size_t i = 0; i < reqs_.size(); ++i) {
        const auto& q = reqs_[i];
        if (q.generated < q.output) continue;  // rejected (or unfinished)
        out.request_log.push_back({static_cast<std::int32_t>(i), q.replica, q.arrival.seconds(),
                                   q.first_token.seconds(), q.finished.seconds(), q.prompt,
                                   q.output});
      }
    out.idle_with_work = idle_with_work_;
    if (rejected_ > 0)
      out.notes.push_back(fmt::format(
          "{} requests rejected: prompt + output exceed the {}-token KV capacity of a replica "
          "or the model's {} positions",
          rejected_, capacity_.tokens(), model_.max_positions));
    if (!setup_.scheduler.prefix_caching &&
        std::any_of(requests_.begin(), requests_.end(),
                    [](const Request& r) { return r.prefix_group >= 0 && r.prefix_tokens > 0; }))
      out.notes.push_back(
          "requests share prefixes but prefix caching is off: every prompt is prefilled in full "
          "(--prefix-caching on reuses cached prefix blocks)");
    if (setup_.shape.tp > topo_.gpus_per_node() && topo_.gpus_per_node() > 0)
      out.notes.push_back("TP spans nodes: every layer's all-reduce crosses the network");
    return out;
  }

  const Topology& topo_;
  const ModelSpec& model_;
  const ServingSetup& setup_;
  const std::vector<Request>& requests_;
  CommContext& comm_;
  ComputeModel compute_;
  KvCapacity capacity_;
  Simulator sim_;
  std::unique_ptr<FlowNetwork> net_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::int64_t> prefill_pool_, decode_pool_, transfer_held_;
  // Disaggregated: the cached prefix blocks a request in transfer still holds on its prefill
  // replica, by request.
  std::unordered_map<std::int32_t, std::vector<std::int32_t>> transfer_shared_;
  std::vector<RequestState> reqs_;
  std::vector<Batch> batches_;
  std::vector<std::uint32_t> free_batches_;
  std::uint64_t rr_ = 0;
  std::int64_t arrived_ = 0, completed_ = 0, rejected_ = 0, preemptions_ = 0, iterations_ = 0,
               output_tokens_ = 0, in_system_ = 0, idle_with_work_ = 0, peak_in_system_ = 0;
  double in_system_area_ = 0, last_change_s_ = 0;
  std::size_t next_issue_ = 0;  // closed loop: the next request a client sends
  Rng think_rng_{setup_.think_seed};
  Rng accept_rng_{setup_.speculative.seed};
  double block_bytes_ = 0, host_Bps_ = 0;
  std::int64_t swapped_out_blocks_ = 0, swapped_in_blocks_ = 0;
  SpeculativeStats spec_;
  double kv_area_ = 0, kv_last_ = 0, kv_last_t_ = 0, kv_peak_ = 0;
  Series kv_series_;
  LogHistogram itl_;
  std::vector<double> kv_transfer_samples_;
  double kv_transfer_bytes_ = 0;
  std::vector<IterationRecord> iteration_log_;
  Time last_finish_, last_check_;
};

}  // namespace

std::string_view name_of(RouterPolicy p) {
  switch (p) {
    case RouterPolicy::round_robin:
      return "round-robin";
    case RouterPolicy::least_outstanding:
      return "least-outstanding";
    case RouterPolicy::jsq_tokens:
      return "jsq-tokens";
  }
  return "?";
}

std::int64_t KvCapacity::tokens() const {
  return blocks * block_size;
}

std::vector<std::int32_t> replica_gpus(const ReplicaShape& shape, std::int64_t r) {
  std::vector<std::int32_t> g;
  for (std::int64_t k = 0; k < shape.gpus(); ++k)
    g.push_back(static_cast<std::int32_t>(r * shape.gpus() + k));
  return g;
}

KvCapacity kv_capacity(const Topology& topo, const ModelSpec& model, const ServingSetup& setup) {
  if (!model.has_architecture())
    throw Error(model.file, "", "serving needs the model's architecture, not only its size");
  const auto& shape = setup.shape;
  if (shape.tp < 1 || shape.pp < 1) throw Error("", "--mesh", "tp and pp must be positive");
  if (shape.pp > model.layers)
    throw Error(
        "", "--mesh",
        fmt::format("pp = {} exceeds the {} layers of {}", shape.pp, model.layers, model.name));
  const auto gpus = setup.total_replicas() * shape.gpus();
  if (gpus > static_cast<std::int64_t>(topo.gpu_count()))
    throw Error("", setup.disaggregated() ? "--disaggregate" : "--replicas",
                fmt::format("{} replicas of tp={} × pp={} need {} GPUs; the cluster has {}",
                            setup.total_replicas(), shape.tp, shape.pp, gpus, topo.gpu_count()));
  ServingMemoryJob job;
  job.tp = shape.tp;
  job.pp = shape.pp;
  job.concurrency = 0;
  job.context = 0;
  job.weight_dtype = shape.weight_dtype;
  job.kv_dtype = shape.kv_dtype;
  job.max_batch_tokens = setup.scheduler.max_batch_tokens;
  KvCapacity c;
  c.block_size = setup.scheduler.block_size;
  c.memory = serving_memory(model, job, setup.memory);
  const auto layers = split_layers(model.layers, shape.pp);
  const double stage_layers = as_double(*std::max_element(layers.begin(), layers.end()));
  const double kv_share = model.mla
                              ? 1.0
                              : (model.kv_heads >= shape.tp ? 1.0 / as_double(shape.tp)
                                                            : 1.0 / as_double(model.kv_heads));
  c.kv_bytes_per_token_rank =
      kv_bytes_per_token(model, shape.kv_dtype) / as_double(model.layers) * stage_layers * kv_share;
  if (const auto& spec = setup.speculative; spec.enabled()) {
    if (shape.pp != 1)
      throw Error("", "--speculative", "speculative decoding is modelled with pp = 1 only");
    if (setup.disaggregated())
      throw Error("", "--speculative",
                  "speculative decoding is not modelled with disaggregated prefill and decode");
    if (spec.proposer == Proposer::draft_model && spec.draft) {
      // The draft model, sharded over the replica's TP degree, beside the target.
      const auto& dm = *spec.draft;
      ServingMemoryJob dj = job;
      dj.pp = 1;
      c.memory.weights += serving_memory(dm, dj, setup.memory).weights;
      const double dshare = dm.mla ? 1.0
                                   : (dm.kv_heads >= shape.tp ? 1.0 / as_double(shape.tp)
                                                              : 1.0 / as_double(dm.kv_heads));
      c.kv_bytes_per_token_rank += kv_bytes_per_token(dm, shape.kv_dtype) * dshare;
    } else {
      // The MTP module: one layer's weights (the target's per-layer share, an assumption) and
      // one layer's KV.
      c.memory.weights += c.memory.weights / stage_layers;
      c.kv_bytes_per_token_rank += c.kv_bytes_per_token_rank / stage_layers;
    }
  }
  const double hbm = topo.gpu.hbm_bytes.as_double();
  const double fraction = setup.scheduler.memory_fraction(shape.tp);
  double room = 0;
  switch (setup.scheduler.kv_budget) {
    case KvBudget::total_fraction:
      room = hbm * fraction - c.memory.total();
      break;
    case KvBudget::free_fraction:
      room = fraction * (hbm - c.memory.total());
      break;
    case KvBudget::static_fraction:
      room = hbm * fraction - c.memory.weights;
      break;
  }
  const double tokens = std::floor(std::max(0.0, room) / c.kv_bytes_per_token_rank);
  c.blocks = static_cast<std::int64_t>(std::floor(tokens / as_double(c.block_size)));
  if (c.blocks < 1)
    throw Error("", "--mesh",
                fmt::format("{} does not fit tp={} × pp={} on {}: weights {:.1f} GB and workspace "
                            "{:.1f} GB per GPU leave no room for a KV cache in {:.1f} GB × {} "
                            "(the engine's KV memory fraction)",
                            model.name, shape.tp, shape.pp, topo.gpu.model, c.memory.weights / 1e9,
                            (c.memory.total() - c.memory.weights) / 1e9, hbm / 1e9, fraction));
  return c;
}

ServingResult simulate_serving(const Topology& topo, const ModelSpec& model,
                               const ServingSetup& setup, const std::vector<Request>& requests,
                               CommContext* context) {
  std::optional<CommContext> own;
  if (!context) context = &own.emplace(topo);
  context->calibration = setup.profile ? &setup.profile->links : nullptr;
  Cluster cluster(topo, model, setup, requests, *context);
  return cluster.run();
}

}  // namespace meshsim
