#pragma once
// Flow-level network on the event engine. A flow moves bytes over a weighted set of directed
// links: a point-to-point transfer striped over several paths uses each path's links with the
// path's fraction; a pipelined collective step uses every link its edges cross. Concurrent flows
// share each
// directed link max-min fairly; rates change only when a flow starts or ends, and only the
// connected set of links and flows touched by the change is re-solved (SimGrid's "selective
// update"). Changes at one instant are re-solved together, once, after every event of that instant
// that was already queued (128 groups starting a collective at the same time: one solve, not 128;
// no simulated time passes before it, so the rates are those of re-solving after each change).
// Remaining bytes are updated lazily; completion times live in an updatable heap; the
// simulator holds one event: the next completion. No packets.
//
// Latency is not added here: the collective layer charges NCCL's per-step latencies (α), which
// include the links' hop latencies.
#include <boost/heap/d_ary_heap.hpp>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/simulator.hpp"
#include "network/max_min_fair.hpp"
#include "topology/topology.hpp"

namespace meshsim {

struct FlowNetworkStats {
  std::uint64_t flows_started = 0;
  std::uint64_t resolves = 0;         // incremental max-min solves
  std::uint64_t flows_resolved = 0;   // flows re-rated, summed over solves
  std::vector<double> bytes_on_link;  // per directed link, payload bytes carried
};

class FlowNetwork {
 public:
  FlowNetwork(const Topology& topo, Simulator& sim);

  // Moves `bytes` (already inflated for protocol overhead by the caller) over `links`. Calls
  // `done` when the last byte has arrived.
  void transfer(FlowLinks links, double bytes, std::function<void()> done);

  // Capacity of a directed link for payload: bandwidth × payload efficiency of its kind.
  double capacity_Bps(std::uint32_t link) const { return capacity_[link]; }
  std::size_t link_count() const { return capacity_.size(); }
  std::size_t active_flows() const { return active_; }
  const FlowNetworkStats& stats() const { return stats_; }
  // Rate of every active flow crossing `link` (for tests and traces; after settle()).
  std::vector<double> rates_on_link(std::uint32_t link) const;
  // Re-solves the changes of this instant now rather than at its end (tests read rates).
  void settle();
  // While idle: the next flows get ids 0, 1, 2, ... in the order they start, as on a fresh
  // network. The solver meets a component's flows in id order and the completion heap breaks
  // ties on it, so a run after this does not depend on what ran before (pricing scratch).
  void renumber_flows();

  // Starts many flows at once and re-rates them in one solve (what a collective step does).
  struct FlowRequest {
    FlowLinks links;
    double bytes;
    std::function<void()> done;
  };
  void transfer_batch(std::vector<FlowRequest> requests);

  // HBM sharing with the kernels beside a collective (engine/replay.hpp's ReplayInterference):
  // a flow reads and writes the memory of the GPUs at its links' ends, so while a GPU's HBM is
  // oversubscribed its flows run at `scale` (1/D) of their max-min rate; a flow touching several
  // such GPUs is paced by the most throttled. Approximation (README): a throttled flow keeps its
  // max-min share of every link (what it leaves unused is not handed to other flows), as the
  // folded replay keeps a slowed collective's link share. Off until enabled (no cost).
  void enable_gpu_rate_scales(const Topology& topo);
  void set_gpu_rate_scale(VertexId gpu, double scale);

 private:
  struct HeapItem {
    Time finish;
    std::uint32_t flow;
  };
  struct Later {
    bool operator()(const HeapItem& a, const HeapItem& b) const {
      return a.finish != b.finish ? a.finish > b.finish : a.flow > b.flow;
    }
  };
  using Heap = boost::heap::d_ary_heap<HeapItem, boost::heap::arity<4>, boost::heap::mutable_<true>,
                                       boost::heap::compare<Later>>;

  struct Flow {
    double remaining = 0;  // bytes at `last`
    Time last;
    std::function<void()> done;
    Heap::handle_type handle;
  };

  std::uint32_t new_flow(FlowLinks links, double bytes, std::function<void()> done);
  void resolve(const std::vector<std::uint32_t>& seed_links);
  // Queues a re-solve of the sets touching `links` at the end of this instant.
  void defer(const std::vector<std::uint32_t>& links);
  void advance(std::uint32_t flow);
  void reschedule();
  void on_completion();

  Simulator& sim_;
  std::vector<double> capacity_;
  std::vector<std::vector<std::uint32_t>> flows_on_link_;
  std::vector<FlowLinks> flow_links_;
  std::vector<double> rate_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  Heap heap_;
  EventHandle next_event_;
  Time next_time_ = Time::max();
  std::size_t active_ = 0;
  MaxMinSolver solver_;
  std::vector<std::uint32_t> link_mark_, flow_mark_;  // epoch stamps for component search
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> pending_seeds_;  // links changed at this instant, not yet solved
  bool settle_queued_ = false;
  // GPU rate scales (empty until enable_gpu_rate_scales): GPU index of each vertex (-1: not a
  // GPU) and of each directed link's ends, each GPU's scale and flows, each flow's GPUs and its
  // unscaled max-min rate.
  void rescale(std::uint32_t flow);
  Time finish_of(std::uint32_t flow) const;
  std::vector<std::int32_t> gpu_of_vertex_, link_src_gpu_, link_dst_gpu_;
  std::vector<double> gpu_scale_;
  std::vector<std::vector<std::uint32_t>> flows_on_gpu_;
  std::vector<std::vector<std::int32_t>> flow_gpus_;
  std::vector<double> base_rate_;
  FlowNetworkStats stats_;
};

}  // namespace meshsim
