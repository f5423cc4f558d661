#include "search/distributed.hpp"

#include <cstdlib>
#include <string>

#include "search/result_json.hpp"

#ifdef MESHSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace meshsim {

MpiWorld mpi_start() {
  MpiWorld w;
#ifdef MESHSIM_HAVE_MPI
  // Only under a launcher: a plain `meshsim search` never touches MPI.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE")) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    w.active = true;
  }
#endif
  return w;
}

void mpi_finish(const MpiWorld& world) {
#ifdef MESHSIM_HAVE_MPI
  if (world.active) MPI_Finalize();
#else
  (void)world;
#endif
}

double broadcast_from_root(const MpiWorld& world, double value) {
#ifdef MESHSIM_HAVE_MPI
  if (world.active && world.size > 1) MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
#else
  (void)world;
#endif
  return value;
}

std::vector<EvaluatedCandidate> evaluate_distributed(const MpiWorld& world, const Topology& topo,
                                                     const ModelSpec& model, const SearchJob& job,
                                                     const std::vector<Candidate>& candidates,
                                                     const SearchOptions& options) {
  if (!world.active || world.size == 1)
    return evaluate_candidates(topo, model, job, candidates, options);
#ifdef MESHSIM_HAVE_MPI
  std::vector<Candidate> mine;
  for (std::size_t i = static_cast<std::size_t>(world.rank); i < candidates.size();
       i += static_cast<std::size_t>(world.size))
    mine.push_back(candidates[i]);
  SearchOptions local = options;
  if (world.rank != 0) local.progress = nullptr;
  const auto results = evaluate_candidates(topo, model, job, mine, local);
  Json out = Json::array();
  for (const auto& e : results) out.push_back(to_json(e));
  const std::string text = out.dump();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<std::size_t>(world.size)), offsets(lengths.size());
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (world.rank == 0) {
    int total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, MPI_COMM_WORLD);
  if (world.rank != 0) return {};
  std::vector<EvaluatedCandidate> merged(candidates.size());
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    const auto part = Json::parse(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    for (std::size_t k = 0; k < part.size(); ++k)
      merged[r + k * static_cast<std::size_t>(world.size)] = evaluated_from_json(part[k]);
  }
  return merged;
#else
  return evaluate_candidates(topo, model, job, candidates, options);
#endif
}

}  // namespace meshsim
