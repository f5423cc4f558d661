// The emitted launch lines run the searched winner again: `search --emit megatron|torchtitan`,
// then `train --from-megatron|--from-torchtitan` on what it printed (issue 18's round trip).
// Its own file, so ctest runs it beside the other search tests (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

using meshsim::test::model_path;
using meshsim::test::run_cli;
using meshsim::test::source_path;
using meshsim::test::topology_path;
using nlohmann::json;

namespace {

// `search COMMON FLAGS --emit torchtitan --json`, its config written to a temporary file, then
// `train COMMON --from-torchtitan FILE --json`: both JSON outputs.
struct RoundTrip {
  json search, train;
};
RoundTrip torchtitan_round_trip(const std::string& common, const std::string& flags,
                                const std::string& file_name) {
  const auto s = run_cli("search" + common + flags + " --emit torchtitan --json");
  REQUIRE_MESSAGE(s.exit_code == 0, s.err);
  RoundTrip r{json::parse(s.out), {}};
  const auto file = (std::filesystem::temp_directory_path() / file_name).string();
  std::ofstream(file) << r.search["launch"]["text"].get<std::string>();
  const auto t = run_cli("train" + common + " --from-torchtitan " + file + " --json");
  REQUIRE_MESSAGE(t.exit_code == 0, t.err);
  r.train = json::parse(t.out);
  return r;
}

}  // namespace

TEST_CASE("search: the emitted Megatron line runs the winner again through train --from-megatron") {
  const std::string common = " --topology " + topology_path("dgx-h100-superpod.json") +
                             " --nodes 4 --workload " +
                             source_path("workloads/models/llama3.1-70b.json");
  // Pinned to 1F1B: Megatron-LM's main line has no zero-bubble schedule, which would win here
  // (its line then says so in a comment and runs 1F1B). Pinned to PP 4, where the unpinned
  // search's winner is (TP 4 × PP 4 × DP 2), so the line carries every layout flag: 32 layouts
  // instead of 96 (this test under the sanitizers ran 200 s).
  const auto s =
      run_cli("search" + common +
              " --seq 4k --gbs 64 --top 1 --schedule 1f1b --pp 4 --emit megatron --json");
  REQUIRE_MESSAGE(s.exit_code == 0, s.err);
  const auto j = json::parse(s.out);
  REQUIRE(j.contains("launch"));  // --emit is kept with --json
  CHECK(j["launch"]["format"] == "megatron");
  const auto text = j["launch"]["text"].get<std::string>();
  CHECK(text.find("--hidden-size 8192 --ffn-hidden-size 28672") != std::string::npos);
  // The megatron stack runs Megatron's unfused vocabulary-parallel loss, so the line leaves
  // --cross-entropy-loss-fusion out (a stack with the fused loss writes it: next test case).
  CHECK(text.find("--cross-entropy-loss-fusion") == std::string::npos);
  const auto& best = j["results"][0];
  const auto file =
      (std::filesystem::temp_directory_path() / "meshsim_emitted_megatron.sh").string();
  std::ofstream(file) << text;
  const auto t = run_cli("train" + common + " --from-megatron " + file + " --json");
  REQUIRE_MESSAGE(t.exit_code == 0, t.err);
  const auto k = json::parse(t.out);
  for (const char* d : {"dp", "tp", "pp", "cp", "ep", "fsdp"}) {
    INFO(d);
    CHECK(k["mesh"][d] == best["mesh"][d]);
  }
  CHECK(k["zero"] == best["zero"]);
  CHECK(k["recompute"] == best["recompute"]);
  CHECK(k["schedule"] == best["schedule"]);
  CHECK(k["mbs"] == best["mbs"]);
  CHECK(k["gbs"] == 64);
  CHECK(k["step_time_s"].get<double>() ==
        doctest::Approx(best["step_time_s"].get<double>()).epsilon(1e-9));
  // The line of another model is refused; the line excludes the layout flags.
  const auto other = run_cli(
      "train --topology " + topology_path("dgx-h100-superpod.json") + " --nodes 4 --workload " +
      source_path("workloads/models/llama3.1-8b.json") + " --from-megatron " + file);
  CHECK(other.exit_code == 2);
  CHECK(other.err ==
        "error: " + file +
            ": --num-layers 80, but the model llama3.1-8b has 32 (the line trains another model "
            "than --workload)\n");
  // A bad script names the file it came from.
  const auto bad = (std::filesystem::temp_directory_path() / "meshsim_bad_megatron.sh").string();
  std::ofstream(bad) << "pretrain_gpt.py --tensor-model-parallel-size eight\n";
  const auto b = run_cli("train" + common + " --from-megatron " + bad);
  CHECK(b.exit_code == 2);
  CHECK(b.err ==
        "error: " + bad + ": --tensor-model-parallel-size 'eight' is not a positive integer\n");
  const auto both = run_cli("train" + common + " --from-megatron " + file + " --mesh tp=8");
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("--from-megatron") != std::string::npos);
  const auto none = run_cli("train" + common + " --seq 4096");
  CHECK(none.exit_code == 2);
  CHECK(none.err ==
        "error: --mesh: is required (or give the layout with --from-megatron or "
        "--from-torchtitan)\n");
}

TEST_CASE("search: a winner on a stack with the fused loss is emitted with the fused loss") {
  // The ideal stack runs the catalogue's fused loss kernel; its Megatron line asks for Megatron's
  // fused cross entropy, which reading the line back runs (as `megatron +fused-loss`). One layout.
  const std::string common = " --topology " + topology_path("dgx-h100.json") + " --workload " +
                             source_path("workloads/models/llama3.1-8b.json") + " --seq 4k --gbs 8";
  const auto s = run_cli("search" + common +
                         " --tp 8 --pp 1 --cp 1 --zero 1 --schedule 1f1b --mbs 1 --top 1 "
                         "--stack ideal --emit megatron --json");
  REQUIRE_MESSAGE(s.exit_code == 0, s.err);
  const auto text = json::parse(s.out)["launch"]["text"].get<std::string>();
  CHECK(text.find(" --cross-entropy-loss-fusion") != std::string::npos);
  const auto file =
      (std::filesystem::temp_directory_path() / "meshsim_emitted_fused_loss.sh").string();
  std::ofstream(file) << text;
  const auto t = run_cli("train --topology " + topology_path("dgx-h100.json") + " --workload " +
                         source_path("workloads/models/llama3.1-8b.json") + " --from-megatron " +
                         file + " --json");
  REQUIRE_MESSAGE(t.exit_code == 0, t.err);
  CHECK(json::parse(t.out)["stack"] == "megatron +fused-loss");
}

TEST_CASE("search: the emitted torchtitan config runs the winner again (--from-torchtitan)") {
  // Pinned to ZeRO-3, the only sharding torchtitan has (FSDP2), and to 1F1B; and to TP 1 × PP 1,
  // where the search's winner is (FSDP over all 32 GPUs): 14 layouts instead of 150.
  const std::string common = " --topology " + topology_path("dgx-h100-superpod.json") +
                             " --nodes 4 --workload llama3.1-70b";
  // Searched on torchtitan-compile: the config compiles the blocks (not the loss), and reading
  // it back runs that stack again.
  const auto round_trip =
      torchtitan_round_trip(common,
                            " --seq 4k --gbs 64 --top 1 --zero 3 --schedule 1f1b --tp 1 --pp 1 "
                            "--stack torchtitan-compile",
                            "meshsim_emitted.toml");
  const auto& j = round_trip.search;
  const auto& k = round_trip.train;
  const auto text = j["launch"]["text"].get<std::string>();
  CHECK(text.starts_with("[model]\nname = \"llama3\"\nflavor = \"70B\"\n"));
  CHECK(text.ends_with("\n[compile]\nenable = true\ncomponents = [\"model\"]\n"));
  const auto file = (std::filesystem::temp_directory_path() / "meshsim_emitted.toml").string();
  const auto& best = j["results"][0];
  CHECK(k["stack"] == "torchtitan-compile");
  CHECK(k["mesh"] == best["mesh"]);
  CHECK(k["zero"] == best["zero"]);
  CHECK(k["mbs"] == best["mbs"]);
  CHECK(k["recompute"] == best["recompute"]);
  CHECK(k["step_time_s"].get<double>() ==
        doctest::Approx(best["step_time_s"].get<double>()).epsilon(1e-9));
  // Another model's flavor is refused.
  const auto other = run_cli("train --topology " + topology_path("dgx-h100-superpod.json") +
                             " --nodes 4 --workload llama3.1-8b --from-torchtitan " + file);
  CHECK(other.exit_code == 2);
  CHECK(other.err ==
        "error: --from-torchtitan: [model] llama3 70B is not the workload's model llama3.1-8b "
        "(torchtitan's llama3 8B)\n");
}

TEST_CASE("search: a torchtitan winner recomputing every N-th block is emitted and runs again") {
  // Pinned to full recompute on torchtitan, CP 2 and micro-batch 1 (where every third block
  // fits): the search recomputes every N-th block for the largest N that fits, and the emitted
  // config says so (selective_ac_option = "N").
  const std::string common = " --topology " + topology_path("dgx-h100-superpod.json") +
                             " --nodes 4 --workload llama3.1-70b";
  const auto round_trip = torchtitan_round_trip(
      common,
      " --seq 4k --gbs 64 --top 1 --zero 3 --schedule 1f1b --tp 1 --pp 1 --cp 2 --mbs 1 "
      "--recompute full --stack torchtitan",
      "meshsim_emitted_every.toml");
  const auto& j = round_trip.search;
  const auto& k = round_trip.train;
  const auto& best = j["results"][0];
  const auto every = best["recompute_every"].get<int>();
  REQUIRE(every > 1);
  CHECK(best["label"].get<std::string>().find("recompute=full-every" + std::to_string(every)) !=
        std::string::npos);
  const auto text = j["launch"]["text"].get<std::string>();
  CHECK(text.find("mode = \"selective\"\nselective_ac_option = \"" + std::to_string(every) +
                  "\"\n") != std::string::npos);
  CHECK(k["recompute"] == "full");
  CHECK(k["recompute_every"] == every);
  CHECK(k["step_time_s"].get<double>() ==
        doctest::Approx(best["step_time_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE(
    "search --recompute-modules: the selective candidates recompute them, and the line says so") {
  // Mixtral 8x7B at 4K on two DGX H100 nodes, pinned to PP 2 and 1F1B: freeing the expert
  // activations and the pre-MLP norm's output lets ZeRO-2 at CP 1 fit with selective recompute.
  const std::string common = " --topology " + topology_path("dgx-h100-superpod.json") +
                             " --nodes 2 --workload " +
                             source_path("workloads/jobs/mixtral-8x7b-4k.json");
  const std::string search =
      "search" + common + " --pp 2 --cp 1 --schedule 1f1b --top 3 --emit megatron";
  const auto s = run_cli(search + " --recompute-modules moe_act,layernorm --json");
  REQUIRE_MESSAGE(s.exit_code == 0, s.err);
  const auto j = json::parse(s.out);
  const auto& best = j["results"][0];
  REQUIRE(best["recompute"] == "selective");
  CHECK(best["recompute_modules"] == json::array({"moe_act", "layernorm"}));
  const auto text = j["launch"]["text"].get<std::string>();
  CHECK(text.find("--recompute-granularity selective --recompute-modules moe_act layernorm") !=
        std::string::npos);
  // The line runs the winner again.
  const auto file =
      (std::filesystem::temp_directory_path() / "meshsim_emitted_modules.sh").string();
  std::ofstream(file) << text;
  const auto t = run_cli("train" + common + " --from-megatron " + file + " --json");
  REQUIRE_MESSAGE(t.exit_code == 0, t.err);
  const auto k = json::parse(t.out);
  CHECK(k["recompute_modules"] == best["recompute_modules"]);
  CHECK(k["step_time_s"].get<double>() ==
        doctest::Approx(best["step_time_s"].get<double>()).epsilon(1e-9));
  // Without the modules no selective layout is tried (fused attention: it frees nothing).
  const auto plain = run_cli(search + " --json");
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
  for (const auto& r : json::parse(plain.out)["results"]) CHECK(r["recompute"] != "selective");
  const auto header = run_cli(search + " --recompute-modules moe_act,layernorm");
  CHECK(header.out.find("\n# selective recompute: modules moe_act, layernorm\n") !=
        std::string::npos);
  CHECK(json::parse(s.out)["notes"] == json::array());
  // Mixtral has no dense layer: mlp acts on none, and the header says so.
  const auto idle = run_cli(search + " --recompute-modules moe_act,mlp");
  REQUIRE_MESSAGE(idle.exit_code == 0, idle.err);
  CHECK(idle.out.find("\n# selective recompute: modules moe_act, mlp\n# note: recompute module "
                      "'mlp' acts on no layer of mixtral-8x7b (its regions need mlp_up)\n") !=
        std::string::npos);
  const auto bad = run_cli(search + " --recompute-modules moe_act,experts");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "error: --recompute-modules: stack 'megatron' has no recompute module "
        "'experts' (its modules: core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, "
        "shared_experts)\n");
  std::filesystem::remove(file);
}
