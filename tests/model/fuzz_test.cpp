// Mutation fuzzing of the workload loaders (models, jobs, calibration profiles): every mutant of
// a bundled file must load or fail with one meshsim::Error line, and whatever loads must survive
// the parameter count, the op catalogue and the memory model without crashing or producing NaN.
#include <doctest/doctest.h>

#include <cmath>

#include "compute/calibration_profile.hpp"
#include "compute/compute_model.hpp"
#include "json_mutation.hpp"
#include "memory/memory_model.hpp"
#include "model/model_loader.hpp"
#include "model/op_catalogue.hpp"
#include "model/param_count.hpp"
#include "model/workload.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::mutate;
using meshsim::test::mutate_typed;
using meshsim::test::source_path;

namespace {

// Everything downstream of a loaded model, on a small shape.
void exercise(const ModelSpec& m) {
  const auto p = count_params(m);
  CHECK(std::isfinite(p.total));
  if (!m.has_architecture()) return;
  LayerShape shape;
  shape.seq = 256;
  const ComputeModel cm(*find_gpu("H100-SXM5-80GB"));
  for (const auto& op : layer_ops(m, m.layers - 1, shape, {2, true, 2, 1})) {
    CHECK(std::isfinite(cm.seconds(op.forward)));
    CHECK(std::isfinite(op.saved_bytes));
  }
  ParallelConfig c;
  const auto stages = training_memory_per_stage(m, {256, 1, 1, DType::bf16, {}}, c, {});
  CHECK(std::isfinite(worst_stage(stages).total()));
}

template <class Load>
void fuzz(const std::string& path, std::uint64_t seed, Load&& load) {
  Rng rng(seed);
  const Json original = load_json_file(path);
  int errors = 0, loaded = 0;
  for (int i = 0; i < 300; ++i) {
    Json doc = original;
    const auto mutations = 1 + rng.below(3);
    // Every other mutant keeps its JSON types (past the type checks to the range checks).
    for (std::uint64_t k = 0; k < mutations; ++k)
      i % 2 == 0 ? mutate_typed(doc, rng) : mutate(doc, rng);
    try {
      load(doc);
      ++loaded;
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK(msg.find('\n') == std::string::npos);
      CHECK(msg.starts_with(path));
      ++errors;
    }
  }
  INFO(path);
  CHECK(errors > 20);  // the mutations reach the checks
  CHECK(loaded > 5);   // and some mutants stay valid
}

}  // namespace

TEST_CASE("mutants of bundled models load or fail cleanly") {
  std::uint64_t seed = 1;
  for (const char* name :
       {"llama3.1-8b", "mixtral-8x7b", "deepseek-v3", "gpt3-175b", "gpt-sc21-1.7b"}) {
    const auto path = source_path(std::string("workloads/models/") + name + ".json");
    fuzz(path, seed++, [&](const Json& doc) {
      const auto m = read_model(JsonRef::root(doc, path));
      // Keep the exercised model small enough to run quickly.
      if (m.layers <= 200) exercise(m);
    });
  }
}

TEST_CASE("mutants of a calibration profile load or fail cleanly") {
  const auto path = source_path("topologies/calibration/h100-sxm-default.json");
  fuzz(path, 99, [&](const Json& doc) {
    const auto p = read_calibration_profile(JsonRef::root(doc, path));
    if (p.gpu != "H100-SXM5-80GB") return;
    const ComputeModel cm(*find_gpu(p.gpu), p);
    CHECK(std::isfinite(cm.seconds(gemm_kernel({4096, 4096, 4096, 1}, DType::fp8))));
  });
}

TEST_CASE("mutants of a job file load or fail cleanly") {
  const auto path = source_path("workloads/jobs/mixtral-8x7b-4k.json");
  fuzz(path, 7, [&](const Json& doc) {
    const auto w = read_workload(JsonRef::root(doc, path));
    CHECK(count_params(w.model).total > 0);
  });
}
