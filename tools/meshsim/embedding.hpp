#pragma once
// What the commands print to, and what an in-process caller (the Python module, python/) lends
// them. The CLI prints to std::cout / std::cerr; a caller running a command in its own thread
// points this thread's streams at its buffers and may lend a cluster it has loaded, with this
// thread's routing and pricing state for it, so a sweep of 1,000 `train` calls loads the cluster
// once. Everything here is per thread: two threads run commands side by side.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "compute/calibration_profile.hpp"
#include "strategy/comm_model.hpp"
#include "topology/topology.hpp"

namespace meshsim::cli {

// A cluster loaded once: the file and node count the flags name, the cluster (with the
// calibration profile its file names already applied) and this thread's CommContext for it.
struct LoadedCluster {
  std::string topology;
  std::int32_t nodes = 0;  // 0: as the file says
  const Topology* topo = nullptr;
  const std::optional<CalibrationProfile>* profile = nullptr;
  CommContext* context = nullptr;
};

// This thread's output streams (std::cout and std::cerr unless a caller set others).
std::ostream& cli_out();
std::ostream& cli_err();

// For the duration of a scope: this thread's commands print to `o` and `e` and may use `cluster`.
class EmbeddedRun {
 public:
  EmbeddedRun(std::ostream& o, std::ostream& e, const LoadedCluster* cluster);
  ~EmbeddedRun();
  EmbeddedRun(const EmbeddedRun&) = delete;
  EmbeddedRun& operator=(const EmbeddedRun&) = delete;

 private:
  std::ostream *out_, *err_;
  const LoadedCluster* cluster_;
};

// The lent cluster when it is the one `topology` and `nodes` name; null otherwise.
const LoadedCluster* lent_cluster(const std::string& topology, std::int32_t nodes);

}  // namespace meshsim::cli
