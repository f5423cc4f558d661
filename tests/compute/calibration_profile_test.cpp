#include "compute/calibration_profile.hpp"

#include <doctest/doctest.h>

#include "compute/compute_model.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

namespace {
std::string error_of(const std::string& text) {
  try {
    const auto doc = parse_json_text(text, "p.json");
    read_calibration_profile(JsonRef::root(doc, "p.json"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("bundled default profiles hold a fitted kernel model and change nothing as a profile") {
  for (const char* name : {"h100-sxm-default.json", "a100-sxm-default.json"}) {
    const auto p =
        load_calibration_profile(source_path(std::string("topologies/calibration/") + name));
    REQUIRE(p.model);
    for (const char* part : {"gemm", "memory", "attention", "decode"})
      CHECK(p.model->contains(part));
    CHECK(p.gemm.empty());  // parameters only: no points to correct against
    const auto gpu = *find_gpu(p.gpu);
    const ComputeModel with(gpu, p), without(gpu);
    const auto k = gemm_kernel({4096, 4096, 4096, 1}, DType::bf16);
    CHECK(with.seconds(k) == without.seconds(k));
  }
}

TEST_CASE("a profile round-trips through JSON") {
  const auto p =
      load_calibration_profile(source_path("topologies/calibration/h100-sxm-default.json"));
  const auto j = to_json(p);
  const auto q = read_calibration_profile(JsonRef::root(j, "again.json"));
  CHECK(to_json(q) == j);
  CHECK(q.gemm.size() == p.gemm.size());
  CHECK(q.memory_bandwidth_Bps == p.memory_bandwidth_Bps);
}

TEST_CASE("bad profiles name the JSON path") {
  CHECK(error_of(R"({"gpu": "x"})") == "p.json:/: missing required field 'source'");
  CHECK(error_of(R"({"gpu": "x", "source": "s", "gemm": [{"dtype": "int4", "m": 1, "n": 1,
        "k": 1, "tflops": 1}]})") ==
        "p.json:/gemm/0/dtype: unknown dtype 'int4' (known: fp32, "
        "bf16, fp16, fp8)");
  CHECK(error_of(R"({"gpu": "x", "source": "s", "gemm": [{"dtype": "bf16", "m": 0, "n": 1,
        "k": 1, "tflops": 1}]})")
            .starts_with("p.json:/gemm/0/m:"));
  CHECK(error_of(R"({"gpu": "x", "source": "s", "attention": [{"dtype": "bf16", "batch": 1,
        "seq_q": 8, "heads": 1, "head_dim": 64, "causal": true, "direction": "sideways",
        "tflops": 1}]})") == "p.json:/attention/0/direction: expected 'forward' or 'backward'");
  CHECK(error_of(R"({"gpu": "x", "source": "s", "extra": 1})")
            .starts_with("p.json:/extra: unknown key 'extra'"));
}
