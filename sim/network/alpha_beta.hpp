#pragma once
// The α-β (latency-bandwidth, Hockney) model of a transfer, t(S) = α + S/β, fitted to measured
// points by least squares, separately per message-size regime: NCCL switches protocol (LL below
// ~64 KiB, LL128 to a few MiB, Simple above; reference/network-model.md), so one line through
// every size fits none of them.
#include <limits>
#include <span>
#include <vector>

namespace meshsim {

struct AlphaBetaPoint {
  double bytes = 0;
  double seconds = 0;
};

struct AlphaBetaRegime {
  double min_bytes = 0;                                        // inclusive
  double max_bytes = std::numeric_limits<double>::infinity();  // exclusive
  double alpha_s = 0;
  double bandwidth_Bps = 0;
  int points = 0;
  double max_relative_error = 0;  // of the fit over its points
  double seconds(double bytes) const { return alpha_s + bytes / bandwidth_Bps; }
};

// Minimises Σ ((α + S/β − t) / t)² (relative error, so 8 B and 8 GiB points weigh the same),
// with α ≥ 0: an unconstrained negative α is refitted through the origin. Needs at least one
// point with S > 0; with one point α = 0.
AlphaBetaRegime fit_alpha_beta(std::span<const AlphaBetaPoint> points);

// Default regime edges: 64 KiB and 8 MiB.
std::vector<double> default_regime_edges();
// One fit per regime that holds at least two points; adjacent regimes with fewer points merge
// into their neighbour. Regimes tile [0, ∞) in order.
std::vector<AlphaBetaRegime> fit_regimes(std::vector<AlphaBetaPoint> points,
                                         const std::vector<double>& edges = default_regime_edges());
// t(S) from the regime that holds S.
double regime_seconds(const std::vector<AlphaBetaRegime>& regimes, double bytes);

}  // namespace meshsim
