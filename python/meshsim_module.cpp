// The C++ side of `import meshsim` (python/meshsim/__init__.py): runs a meshsim command in this
// process, on the same library and command code as the CLI (tools/meshsim), with this thread's
// output captured (tools/meshsim/embedding.hpp) and the GIL released while it simulates. A loaded
// cluster keeps one routing and pricing context per calling thread, so repeated `train` calls on
// it pay the load, the routes and the collective prices once.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "commands.hpp"
#include "core/error.hpp"
#include "job_args.hpp"
#include "topology/topology_loader.hpp"

namespace py = pybind11;
using namespace meshsim;

namespace {

class Cluster {
 public:
  Cluster(std::string topology, std::int32_t nodes)
      : topology_(std::move(topology)), nodes_(nodes) {
    TopologyOptions opt;
    if (nodes_ < 0) throw Error("", "nodes", "must be a positive integer");
    if (nodes_ > 0) opt.nodes = nodes_;
    topo_ = load_topology(topology_, opt);
    // The file's own calibration profile, applied once (as each CLI run applies it).
    std::ostringstream sink;
    cli::EmbeddedRun quiet(sink, sink, nullptr);
    profile_ = cli::calibration_for(topo_, "");
  }

  // What a command run on this thread may use in place of loading the file again.
  cli::LoadedCluster lend() {
    CommContext* context = nullptr;
    {
      std::lock_guard lock(mutex_);
      auto& c = contexts_[std::this_thread::get_id()];
      if (!c) c = std::make_unique<CommContext>(topo_);
      context = c.get();
    }
    return {topology_, nodes_, &topo_, &profile_, context};
  }

  std::size_t gpus() const { return topo_.gpu_count(); }
  const std::string& topology() const { return topology_; }
  std::int32_t nodes() const { return nodes_; }

 private:
  std::string topology_;
  std::int32_t nodes_ = 0;
  Topology topo_;
  std::optional<CalibrationProfile> profile_;
  std::mutex mutex_;
  std::map<std::thread::id, std::unique_ptr<CommContext>> contexts_;
};

// Runs `meshsim ARGS...` in this process: (exit code, stdout, stderr).
std::tuple<int, std::string, std::string> run(const std::vector<std::string>& args,
                                              Cluster* cluster) {
  std::vector<std::string> argv_storage{"meshsim"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::ostringstream out, err;
  int code = 0;
  {
    py::gil_scoped_release release;
    std::optional<cli::LoadedCluster> lent;
    if (cluster) lent = cluster->lend();
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    cli::EmbeddedRun scope(out, err, lent ? &*lent : nullptr);
    code = cli::run_command(static_cast<int>(argv.size()), argv.data());
  }
  return {code, out.str(), err.str()};
}

// The same command `n` times with no Python in the loop (the library's own time, for the API's
// overhead benchmark): seconds of wall time.
double time_runs(const std::vector<std::string>& args, Cluster* cluster, int n) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    const auto [code, out, err] = run(args, cluster);
    if (code != 0) throw std::runtime_error("meshsim exited " + std::to_string(code) + ": " + err);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

PYBIND11_MODULE(_meshsim, m) {
  m.doc() = "meshsim's C++ library, run in-process (use the `meshsim` package)";
  m.attr("version") = MESHSIM_VERSION;
  py::register_exception<Error>(m, "LoadError");
  py::class_<Cluster>(m, "Cluster")
      .def(py::init<std::string, std::int32_t>(), py::arg("topology"), py::arg("nodes") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("gpus", &Cluster::gpus)
      .def_property_readonly("topology", &Cluster::topology)
      .def_property_readonly("nodes", &Cluster::nodes);
  m.def("run", &run, py::arg("args"), py::arg("cluster") = nullptr);
  m.def("time_runs", &time_runs, py::arg("args"), py::arg("cluster"), py::arg("n"));
}
