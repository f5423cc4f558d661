#pragma once
// Measured link and collective timings (from the calibration harness or an nccl-tests log) and
// how the network model uses them:
//  - a point-to-point fit per link class rescales every link of that class so that a modelled
//    GPU-to-GPU copy runs at the measured large-message bandwidth;
//  - a collective fit for (op, ranks, nodes) corrects the modelled time of that collective by
//    measured / modelled-alone at the same size, so contention between concurrent copies still
//    comes from the flow model while the level is the measured one.
#include <cstdint>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "network/alpha_beta.hpp"
#include "network/collective.hpp"
#include "topology/router.hpp"
#include "topology/topology.hpp"

namespace meshsim {

struct P2pCalibration {
  LinkKind kind = LinkKind::nvlink;  // the class of the links between the measured GPUs
  std::vector<AlphaBetaRegime> regimes;
};

// β of a collective regime is the algorithm bandwidth S/t (nccl-tests' algbw).
struct CollectiveCalibration {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::int32_t ranks = 0, nodes = 1;
  std::vector<AlphaBetaRegime> regimes;
};

struct LinkCalibration {
  std::vector<P2pCalibration> p2p;
  std::vector<CollectiveCalibration> collectives;
  bool empty() const { return p2p.empty() && collectives.empty(); }
  const CollectiveCalibration* find(CollectiveOp op, std::int32_t ranks, std::int32_t nodes) const;
};

// The bandwidth a lone copy from GPU `a` to GPU `b` gets in the model: per path, the bottleneck
// payload capacity over the path's share of the bytes; the slowest path sets the pace.
double modelled_p2p_Bps(const Topology& topo, Router& router, std::int32_t a, std::int32_t b);
// Rescales each calibrated class; returns one line per class saying by how much. A class with no
// GPU pair joined by it in the cluster is left alone (and said so).
std::vector<std::string> apply_p2p_calibration(Topology& topo, const LinkCalibration& cal);

// Nodes spanned by `ranks` (global GPU indices).
std::int32_t nodes_spanned(const Topology& topo, const std::vector<std::int32_t>& ranks);
// `t` scaled by measured / `model_alone` when a fit matches the call; `t` otherwise.
Time calibrated_collective_time(const LinkCalibration& cal, const Topology& topo,
                                const CollectiveCall& call, Time model_alone, Time t);

// JSON: {p2p: [{class, regimes}], collectives: [{op, ranks, nodes, regimes}]} with regimes
// [{min_bytes, max_bytes (absent: unbounded), alpha_us, GBps}].
Json to_json(const LinkCalibration& c);
LinkCalibration read_link_calibration(const JsonRef& ref);
Json regimes_json(const std::vector<AlphaBetaRegime>& regimes);

}  // namespace meshsim
