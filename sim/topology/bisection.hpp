#pragma once
// Bisection bandwidth: the maximum flow per direction from the first half of the GPUs (in rank
// order) to the second half, with every link at its per-direction capacity. For a fat tree this
// is the classic definition (the cut between two halves of the machine); for one node it counts
// every path between the halves, NVLink and PCIe alike.
#include "topology/topology.hpp"

namespace meshsim {

double bisection_Bps(const Topology& topo);

}  // namespace meshsim
