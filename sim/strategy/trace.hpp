#pragma once
// A training step as per-rank op graphs: what runs on which stream of which rank, and what each
// op is (compute, or which collective of which group with how many bytes).
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/op_graph.hpp"
#include "parallel/placement.hpp"

namespace meshsim {

struct TraceOpInfo {
  std::int32_t rank = 0;
  bool comm = false;
  bool host = false;  // the host's launch of the next op's kernels (kind "host"), not GPU work
  GroupKind group = GroupKind::tp;
  std::string_view kind = "compute";  // compute, optimizer, all_reduce, all_gather, ...
  double bytes = 0;                   // collective size S (nccl-tests' definition)
  double wire_bytes = 0;              // bytes this GPU sends for it
  double model_flops = 0;             // MFU convention
  double hardware_flops = 0;
  bool recompute = false;
  // Interference (engine/replay.hpp): a compute op runs `slowdown` times longer while a
  // collective that holds SMs is in flight on its GPU; a comm op on copy engines holds none.
  float slowdown = 1.0F;
  bool holds_sms = true;
  // A compute op priced beside its own collective (a TP-overlap chunk GEMM beside its SM-holding
  // transfers, a bulk-overlap GEMM beside its bulk collective): the rank's communication stream
  // (StreamId value) whose ops are not "a collective beside it" for `slowdown`; -1: none. While
  // only that stream's SM-holding op runs, the op runs `own_slowdown` times longer; while it and
  // another do, `both_slowdown` times (0: `slowdown`).
  std::int32_t priced_beside = -1;
  float own_slowdown = 1.0F;
  float both_slowdown = 0.0F;
  // HBM sharing (engine/replay.hpp): a compute op's HBM traffic as a fraction of its time at
  // the achievable bandwidth; a collective's HBM demand as a fraction of that bandwidth (set by
  // the training simulation from the links it uses).
  float hbm_fraction = 0.0F;
  float hbm_demand = 0.0F;
};

struct Trace {
  OpGraph graph;
  std::vector<TraceOpInfo> info;           // by OpId
  std::vector<std::int32_t> ranks;         // the simulated ranks (one per stage when folded)
  std::vector<std::int64_t> chunk_layers;  // layers of each global model chunk
  std::int64_t microbatches = 0;
  bool launches = false;           // whether host launch ops (TraceOpInfo::host) are in the graph
  std::vector<std::string> notes;  // what the trace leaves out, for the run's notes
};

}  // namespace meshsim
