#pragma once
// `mpirun -np K meshsim search ...`: every MPI rank evaluates the candidates i with
// i mod K = rank (threads inside each rank as usual), rank 0 gathers them back into the
// candidates' order, so ranking and output are exactly those of a single process.
#include <vector>

#include "search/search.hpp"

namespace meshsim {

struct MpiWorld {
  int rank = 0, size = 1;
  bool active = false;  // MPI initialised by meshsim (launched under mpirun)
};

// Initialises MPI when meshsim was started by an MPI launcher (OpenMPI's environment) and MPI
// support is built in; otherwise a one-process world.
MpiWorld mpi_start();
void mpi_finish(const MpiWorld& world);

// Rank 0's value on every rank (the bounded search's K-th best time); `value` in one process.
double broadcast_from_root(const MpiWorld& world, double value);

// On rank 0: every candidate's evaluation, in input order. On other ranks: empty.
std::vector<EvaluatedCandidate> evaluate_distributed(const MpiWorld& world, const Topology& topo,
                                                     const ModelSpec& model, const SearchJob& job,
                                                     const std::vector<Candidate>& candidates,
                                                     const SearchOptions& options);

}  // namespace meshsim
