#pragma once
// Graphviz export of the cluster graph: one edge per physical link (dir=both), labelled with its
// kind and per-direction bandwidth; vertices coloured by kind.
#include <ostream>

#include "topology/topology.hpp"

namespace meshsim {

void write_dot(std::ostream& out, const Topology& topo);

}  // namespace meshsim
