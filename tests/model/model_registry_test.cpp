#include "model/model_registry.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "error_of.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::error_of;
namespace fs = std::filesystem;

namespace {

// A hub cache in huggingface_hub's layout with one repository.
fs::path fake_hub(const std::string& name, bool with_ref, int snapshots) {
  const auto hub = fs::temp_directory_path() / ("meshsim_hub_" + name);
  fs::remove_all(hub);
  const auto repo = hub / "models--acme--Tiny-1B";
  for (int i = 0; i < snapshots; ++i) {
    const auto snap = repo / "snapshots" / ("commit" + std::to_string(i));
    fs::create_directories(snap);
    std::ofstream(snap / "config.json")
        << R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
               "num_hidden_layers": )"
        << 16 + i << R"(, "num_attention_heads": 32, "num_key_value_heads": 8,
               "vocab_size": 32000, "hidden_act": "silu"})";
  }
  if (with_ref) {
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << "commit" << snapshots - 1 << "\n";
  }
  return hub;
}

}  // namespace

TEST_CASE("a bundled model by its file name or its Hugging Face id, in any case") {
  const auto by_name = load_workload_or_model_id("llama3.1-70b", "");
  CHECK(by_name.model.name == "llama3.1-70b");
  CHECK(by_name.model.layers == 80);
  CHECK(by_name.model.hf_id == "meta-llama/Llama-3.1-70B");
  CHECK(by_name.file == "workloads/models/llama3.1-70b.json");
  const auto by_id = load_workload_or_model_id("META-LLAMA/llama-3.1-70b", "");
  CHECK(by_id.model.name == "llama3.1-70b");
  CHECK(by_id.model.hidden == 8192);
  // A file that exists is read as a file, as before.
  const auto file = load_workload_or_model_id(test::model_path("llama3.1-8b"), "");
  CHECK(file.model.layers == 32);
  // Every bundled file parses (the table is generated from workloads/models/).
  CHECK(bundled_models().size() >= 20);
  for (const auto& m : bundled_models()) {
    INFO(m.file);
    CHECK_NOTHROW(load_workload_or_model_id(fs::path(m.file).stem().string(), ""));
  }
}

TEST_CASE("a Hugging Face id from the local hub cache: refs/main, else the only snapshot") {
  const auto hub = fake_hub("ref", true, 2);
  const auto w = load_workload_or_model_id("acme/Tiny-1B", hub.string());
  CHECK(w.model.layers == 17);  // refs/main names commit1
  CHECK(w.model.name == "Tiny-1B");
  CHECK(w.model.hf_id == "acme/Tiny-1B");
  CHECK(w.file.ends_with("snapshots/commit1/config.json"));

  const auto one = fake_hub("one", false, 1);
  CHECK(load_workload_or_model_id("acme/Tiny-1B", one.string()).model.layers == 16);

  const auto two = fake_hub("two", false, 2);
  CHECK(error_of([&] {
          load_workload_or_model_id("acme/Tiny-1B", two.string());
        }).find("holds 2 snapshots and no refs/main: give the config.json path") !=
        std::string::npos);
}

TEST_CASE("an unknown name is one error with the nearest known name") {
  CHECK(error_of([] { load_workload_or_model_id("meta-llama/Llama-3.1-7B", "/nonexistent"); }) ==
        "meta-llama/Llama-3.1-7B: not a file, a bundled model or a Hugging Face id in the local "
        "cache (/nonexistent); did you mean 'meta-llama/Llama-3.1-70B'?");
  CHECK(error_of([] {
          load_workload_or_model_id("llama3.1-8", "");
        }).ends_with("did you mean 'llama3.1-8b'?"));
  CHECK(error_of([] {
          load_workload_or_model_id("completely/different-thing", "");
        }).find("bundled: llama3.1-8b") != std::string::npos);
  // A path that looks like a file keeps the file error.
  CHECK(error_of([] { load_workload_or_model_id("missing.json", ""); }) ==
        "missing.json: cannot open file");
}
