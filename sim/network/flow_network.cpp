#include "network/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>

#include "core/error.hpp"
#include "network/link_efficiency.hpp"

namespace meshsim {

FlowNetwork::FlowNetwork(const Topology& topo, Simulator& sim)
    : sim_(sim),
      capacity_(topo.directed_edge_count()),
      flows_on_link_(topo.directed_edge_count()),
      solver_(topo.directed_edge_count()),
      link_mark_(topo.directed_edge_count(), 0) {
  for (std::uint32_t l = 0; l < capacity_.size(); ++l) {
    const Link& link = topo.link(l);
    capacity_[l] = link.bandwidth_Bps * payload_efficiency(link.kind);
  }
  stats_.bytes_on_link.assign(capacity_.size(), 0.0);
}

std::uint32_t FlowNetwork::new_flow(FlowLinks links, double bytes, std::function<void()> done) {
  std::uint32_t id;
  if (!free_flows_.empty()) {
    id = free_flows_.back();
    free_flows_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_links_.emplace_back();
    rate_.push_back(0.0);
    if (!gpu_scale_.empty()) {
      base_rate_.push_back(0.0);
      flow_gpus_.emplace_back();
    }
    flow_mark_.push_back(0);
  }
  Flow& f = flows_[id];
  f.remaining = bytes;
  f.last = sim_.now();
  f.done = std::move(done);
  for (const auto& u : links) {
    flows_on_link_[u.link].push_back(id);
    stats_.bytes_on_link[u.link] += bytes * u.weight;
  }
  if (!gpu_scale_.empty()) {
    auto& gpus = flow_gpus_[id];
    for (const auto& u : links)
      for (auto g : {link_src_gpu_[u.link], link_dst_gpu_[u.link]})
        if (g >= 0 && std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
    for (auto g : gpus) flows_on_gpu_[static_cast<std::size_t>(g)].push_back(id);
  }
  flow_links_[id] = std::move(links);
  f.handle = heap_.push(HeapItem{Time::max(), id});
  ++active_;
  ++stats_.flows_started;
  return id;
}

void FlowNetwork::transfer(FlowLinks links, double bytes, std::function<void()> done) {
  std::vector<FlowRequest> one;
  one.push_back(FlowRequest{std::move(links), bytes, std::move(done)});
  transfer_batch(std::move(one));
}

void FlowNetwork::transfer_batch(std::vector<FlowRequest> requests) {
  std::vector<std::uint32_t> seeds;
  std::vector<std::function<void()>> immediate;
  for (auto& req : requests) {
    if (req.links.empty() || req.bytes <= 0.0) {
      immediate.push_back(std::move(req.done));  // nothing to move: done now
      continue;
    }
    seeds.push_back(req.links.front().link);
    new_flow(std::move(req.links), req.bytes, std::move(req.done));
  }
  if (!seeds.empty()) defer(seeds);
  for (auto& d : immediate) sim_.schedule_after(Time::zero(), std::move(d));
}

void FlowNetwork::defer(const std::vector<std::uint32_t>& links) {
  pending_seeds_.insert(pending_seeds_.end(), links.begin(), links.end());
  if (settle_queued_) return;
  settle_queued_ = true;
  sim_.schedule_after(Time::zero(), [this] { settle(); });
}

void FlowNetwork::settle() {
  settle_queued_ = false;
  if (pending_seeds_.empty()) return;
  auto seeds = std::move(pending_seeds_);
  pending_seeds_.clear();
  resolve(seeds);
  reschedule();
}

void FlowNetwork::advance(std::uint32_t flow) {
  Flow& f = flows_[flow];
  const Time now = sim_.now();
  if (now > f.last && rate_[flow] > 0.0 && std::isfinite(rate_[flow]))
    f.remaining = std::max(0.0, f.remaining - rate_[flow] * (now - f.last).seconds());
  f.last = now;
}

void FlowNetwork::resolve(const std::vector<std::uint32_t>& seed_links) {
  // The connected set: links ↔ flows reachable from the changed links.
  if (++epoch_ == 0) {
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    std::fill(flow_mark_.begin(), flow_mark_.end(), 0);
    epoch_ = 1;
  }
  std::vector<std::uint32_t> component;
  std::deque<std::uint32_t> links;
  for (auto l : seed_links)
    if (link_mark_[l] != epoch_) {
      link_mark_[l] = epoch_;
      links.push_back(l);
    }
  while (!links.empty()) {
    const auto l = links.front();
    links.pop_front();
    for (auto f : flows_on_link_[l]) {
      if (flow_mark_[f] == epoch_) continue;
      flow_mark_[f] = epoch_;
      component.push_back(f);
      for (const auto& u : flow_links_[f])
        if (link_mark_[u.link] != epoch_) {
          link_mark_[u.link] = epoch_;
          links.push_back(u.link);
        }
    }
  }
  std::sort(component.begin(), component.end());  // order-independent of the search
  for (auto f : component) advance(f);
  solver_.solve(component, flow_links_, capacity_, rate_);
  ++stats_.resolves;
  stats_.flows_resolved += component.size();
  for (auto f : component) {
    if (!gpu_scale_.empty()) {
      base_rate_[f] = rate_[f];
      rescale(f);
    }
    heap_.update(flows_[f].handle, HeapItem{finish_of(f), f});
  }
}

Time FlowNetwork::finish_of(std::uint32_t flow) const {
  const double r = rate_[flow];
  if (!(r > 0.0)) return Time::max();
  const Time now = sim_.now();
  const Time left = Time::from_seconds_ceil(flows_[flow].remaining / r);
  // Past the end of integer time: said as an input out of range (Simulator::schedule_after).
  if (left > Time::max() - now)
    throw Error("", "",
                "a transfer would finish past 2^63 ps (about 106 days): a link this "
                "slow is beyond what meshsim can time");
  return now + left;
}

void FlowNetwork::rescale(std::uint32_t flow) {
  double s = 1.0;
  for (auto g : flow_gpus_[flow]) s = std::min(s, gpu_scale_[static_cast<std::size_t>(g)]);
  rate_[flow] = base_rate_[flow] * s;
}

void FlowNetwork::enable_gpu_rate_scales(const Topology& topo) {
  if (!gpu_scale_.empty()) return;
  if (active_ != 0) throw std::logic_error("flow network: enabling GPU scales with flows active");
  gpu_of_vertex_.assign(topo.vertex_count(), -1);
  for (std::size_t i = 0; i < topo.gpus().size(); ++i)
    gpu_of_vertex_[topo.gpus()[i]] = static_cast<std::int32_t>(i);
  link_src_gpu_.resize(capacity_.size());
  link_dst_gpu_.resize(capacity_.size());
  for (std::uint32_t l = 0; l < capacity_.size(); ++l) {
    const auto e = topo.edge(l);
    link_src_gpu_[l] = gpu_of_vertex_[boost::source(e, topo.graph())];
    link_dst_gpu_[l] = gpu_of_vertex_[boost::target(e, topo.graph())];
  }
  gpu_scale_.assign(topo.gpus().size(), 1.0);
  flows_on_gpu_.assign(topo.gpus().size(), {});
  flow_gpus_.assign(flows_.size(), {});
  base_rate_.assign(flows_.size(), 0.0);
}

void FlowNetwork::set_gpu_rate_scale(VertexId gpu, double scale) {
  if (gpu_scale_.empty()) throw std::logic_error("flow network: GPU scales not enabled");
  const auto g = static_cast<std::size_t>(gpu_of_vertex_.at(gpu));
  if (gpu_scale_[g] == scale) return;
  gpu_scale_[g] = scale;
  bool moved = false;
  for (auto f : flows_on_gpu_[g]) {
    advance(f);  // the bytes moved at the old rate
    const double before = rate_[f];
    rescale(f);
    if (rate_[f] == before) continue;
    heap_.update(flows_[f].handle, HeapItem{finish_of(f), f});
    moved = true;
  }
  if (moved) reschedule();
}

void FlowNetwork::reschedule() {
  const Time next = heap_.empty() ? Time::max() : heap_.top().finish;
  if (next == next_time_) return;
  sim_.cancel(next_event_);
  next_time_ = next;
  if (next != Time::max()) next_event_ = sim_.schedule_at(next, [this] { on_completion(); });
}

void FlowNetwork::on_completion() {
  next_time_ = Time::max();
  next_event_ = EventHandle{};
  const Time now = sim_.now();
  std::vector<std::uint32_t> seeds;
  std::vector<std::function<void()>> finished;
  while (!heap_.empty() && heap_.top().finish <= now) {
    const auto id = heap_.top().flow;
    heap_.pop();
    Flow& f = flows_[id];
    --active_;
    for (const auto& u : flow_links_[id]) {
      // Unordered: a link's flows are only walked to find a component, which resolve() sorts.
      auto& v = flows_on_link_[u.link];
      *std::find(v.begin(), v.end(), id) = v.back();
      v.pop_back();
      seeds.push_back(u.link);
    }
    flow_links_[id].clear();
    rate_[id] = 0.0;
    if (!gpu_scale_.empty()) {
      for (auto g : flow_gpus_[id]) {
        auto& v = flows_on_gpu_[static_cast<std::size_t>(g)];
        *std::find(v.begin(), v.end(), id) = v.back();
        v.pop_back();
      }
      flow_gpus_[id].clear();
      base_rate_[id] = 0.0;
    }
    free_flows_.push_back(id);
    finished.push_back(std::move(f.done));
    f.done = nullptr;
  }
  // The survivors are re-rated with whatever the finished flows' callbacks start at this instant.
  if (!seeds.empty())
    defer(seeds);
  else
    reschedule();
  for (auto& d : finished) d();
}

void FlowNetwork::renumber_flows() {
  if (active_ != 0 || !pending_seeds_.empty())
    throw std::logic_error("flow network: renumbering flows while some are active");
  free_flows_.resize(flows_.size());
  for (std::size_t i = 0; i < free_flows_.size(); ++i)
    free_flows_[i] = static_cast<std::uint32_t>(free_flows_.size() - 1 - i);
}

std::vector<double> FlowNetwork::rates_on_link(std::uint32_t link) const {
  std::vector<double> out;
  for (auto f : flows_on_link_[link]) out.push_back(rate_[f]);
  return out;
}

}  // namespace meshsim
