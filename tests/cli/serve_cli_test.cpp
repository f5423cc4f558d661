#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "cli_runner.hpp"
#include "compute/compute_model.hpp"
#include "model/model_loader.hpp"
#include "report/chart_check.hpp"
#include "serving/step_cost.hpp"
#include "topology/topology_loader.hpp"

using meshsim::test::run_cli;
using meshsim::test::source_path;
using nlohmann::json;

namespace {

std::size_t count_of(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

const std::string kServe70b = "serve --topology " + source_path("topologies/dgx-h100.json") +
                              " --workload " + source_path("workloads/models/llama3.1-70b.json");

json serve_json(const std::string& args) {
  return meshsim::test::run_cli_json(args + " --json");
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("serve: the issue's acceptance run prints every key with sane values") {
  const auto j = serve_json(kServe70b +
                            " --mesh tp=8 --replicas 1 --rate 5 --requests 2000 --prompt "
                            "fixed:1024 --output fixed:256");
  for (const char* k : {"ttft_s", "tpot_s", "itl_s", "e2e_s"})
    for (const char* q : {"mean", "p50", "p90", "p99"}) {
      INFO(k << "." << q);
      REQUIRE(j[k].contains(q));
      CHECK(j[k][q].get<double>() > 0);
    }
  for (const char* k : {"requests_per_s", "output_tokens_per_s", "tokens_per_s_per_gpu"})
    CHECK(j["throughput"][k].get<double>() > 0);
  CHECK(j["completed"] == 2000);
  CHECK(j["preemptions"] == 0);
  CHECK(j.contains("goodput_requests_per_s"));
  // Poisson at 5 req/s for 2000 requests: ~400 s; throughput close to the offered rate.
  CHECK(j["throughput"]["requests_per_s"].get<double>() == doctest::Approx(5).epsilon(0.05));
  CHECK(j["throughput"]["output_tokens_per_s"].get<double>() ==
        doctest::Approx(256 * j["throughput"]["requests_per_s"].get<double>()));
  // TTFT ≥ one prefill of 1024 tokens; TPOT ≥ a batch-1 decode step.
  using namespace meshsim;
  const auto topo = load_topology(source_path("topologies/dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-70b.json"));
  const ComputeModel cm(topo.gpu);
  CommContext comm(topo);
  StepCost cost(topo, model, ReplicaShape{.tp = 8}, {0, 1, 2, 3, 4, 5, 6, 7}, cm, comm);
  BatchShape prefill;
  prefill.prefill.push_back(PrefillChunk{.tokens = 1024, .context = 0});
  prefill.sampled = 1;
  BatchShape decode;
  decode.decodes = 1;
  decode.decode_context = 1025;
  decode.sampled = 1;
  const double one_prefill = cost.stage_seconds(0, prefill);
  const double one_decode = cost.stage_seconds(0, decode);
  MESSAGE("70B tp=8: one prefill ", one_prefill, " s, batch-1 decode ", one_decode * 1e3,
          " ms; TTFT p50 ", j["ttft_s"]["p50"].get<double>(), " s, TPOT p50 ",
          1e3 * j["tpot_s"]["p50"].get<double>(), " ms");
  CHECK(j["ttft_s"]["p50"].get<double>() >= one_prefill);
  CHECK(j["tpot_s"]["p50"].get<double>() >= one_decode);
  CHECK(j["e2e_s"]["p99"].get<double>() >= j["e2e_s"]["p50"].get<double>());
}

TEST_CASE("serve: traces, bursty traffic files, fp8, routers, disaggregation") {
  const auto chat = serve_json(kServe70b + " --mesh tp=4 --replicas 2 --traffic " +
                               source_path("workloads/traffic/chat.csv") + " --requests 200");
  CHECK(chat["completed"] == 200);
  const auto bursty =
      serve_json(kServe70b + " --mesh tp=8 --traffic " +
                 source_path("workloads/traffic/bursty-gamma.json") + " --requests 300");
  CHECK(bursty["completed"] == 300);
  const auto fp8 = serve_json(kServe70b +
                              " --mesh tp=4 --replicas 2 --dtype fp8 --kv-dtype fp8 --rate 2 "
                              "--requests 100 --router jsq-tokens");
  const auto bf16 = serve_json(kServe70b +
                               " --mesh tp=4 --replicas 2 --rate 2 --requests 100 --router "
                               "jsq-tokens");
  CHECK(fp8["tpot_s"]["mean"].get<double>() < bf16["tpot_s"]["mean"].get<double>());
  CHECK(fp8["kv_cache"]["tokens_per_replica"].get<double>() >
        2 * bf16["kv_cache"]["tokens_per_replica"].get<double>());
  const auto pd = serve_json(kServe70b +
                             " --mesh tp=4 --disaggregate 1:1 --rate 1 --requests 50 "
                             "--prompt fixed:2048 --output fixed:64");
  CHECK(pd["completed"] == 50);
  CHECK(pd["kv_transfer_bytes"].get<double>() > 0);
  CHECK(pd["gpus"] == 8);
  const auto pp = serve_json(kServe70b + " --mesh tp=4,pp=2 --rate 2 --requests 100");
  CHECK(pp["completed"] == 100);
}

TEST_CASE("serve: --trace and --report write a Chrome trace and an HTML report") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto trace = (dir / "meshsim_serve_trace.json").string();
  const auto report = (dir / "meshsim_serve_report.html").string();
  const auto r = run_cli(kServe70b + " --mesh tp=8 --rate 4 --requests 200 --trace " + trace +
                         " --report " + report);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto t = json::parse(slurp(trace));
  std::size_t iterations = 0, counters = 0;
  for (const auto& e : t["traceEvents"]) {
    iterations += e["ph"] == "X" ? 1 : 0;
    counters += e["ph"] == "C" ? 1 : 0;
  }
  CHECK(iterations > 100);
  CHECK(counters > 0);
  const auto html = slurp(report);
  CHECK(html.find("Latency CDFs") != std::string::npos);
  CHECK(html.find("KV utilisation") != std::string::npos);
  CHECK(html.find("</html>") != std::string::npos);
  // TTFT, TPOT, ITL and E2E CDFs, TTFT against prompt length, requests, batch and throughput
  // over time, KV utilisation; every one with labelled axes and round ticks.
  CHECK(count_of(html, "<svg") == 9);
  for (const auto& problem : meshsim::test::chart_problems(html)) FAIL_CHECK(problem);
  CHECK(html.find("TTFT against prompt length") != std::string::npos);
  CHECK(html.find("inter-token latency") != std::string::npos);
  CHECK(html.find("output tokens/s") != std::string::npos);
  // The SLOs (2 s TTFT, 200 ms TPOT by default) lie past every sample at this load: both lines
  // are still drawn, the axes extended to them.
  CHECK(count_of(html, "class=\"marker\"") == 2);
}

TEST_CASE("serve --search compares layouts and answers replicas versus sharding") {
  const auto r = run_cli(kServe70b +
                         " --search --gpus 8 --rate 4 --requests 300 --prompt fixed:1024 "
                         "--output fixed:128 --emit vllm");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find("verdict: ") != std::string::npos);
  CHECK(r.out.find("beat") != std::string::npos);
  CHECK(r.out.find("1 × tp=8 pp=1") != std::string::npos);
  CHECK(r.out.find("refused") != std::string::npos);  // tp=1: 70B does not fit one GPU
  CHECK(r.err.find("vllm serve meta-llama/Llama-3.1-70B --port 8000") != std::string::npos);
  CHECK(r.err.find("--tensor-parallel-size") != std::string::npos);
  const auto j = serve_json(kServe70b +
                            " --search --gpus 8 --rate 4 --requests 100 --prompt fixed:512 "
                            "--output fixed:64");
  CHECK(j["candidates"].size() >= 4);
  CHECK(j["verdict"].get<std::string>().size() > 10);
  const auto sg = run_cli(kServe70b + " --search --gpus 8 --rate 2 --requests 50 --emit sglang");
  CHECK(sg.err.find("sglang.launch_server") != std::string::npos);
}

TEST_CASE("serve: same inputs, same bytes") {
  const std::string args = kServe70b +
                           " --mesh tp=4 --replicas 2 --rate 3 --requests 300 "
                           "--prompt lognormal:800,0.7 --output lognormal:200,0.5";
  const auto a = run_cli(args + " --json");
  const auto b = run_cli(args + " --json");
  CHECK(a.exit_code == 0);
  CHECK(a.out == b.out);
}

TEST_CASE("serve: bad input is one error line naming the flag") {
  const std::pair<std::string, std::string> cases[] = {
      {" --mesh dp=2,tp=4 --rate 1", "--mesh"},
      {" --mesh tp=8 --rate 1 --prompt fixed:0", "--prompt"},
      {" --mesh tp=8 --rate fast", "--rate"},
      {" --mesh tp=8", "--rate"},
      {" --mesh tp=4 --disaggregate 1 --rate 1", "--disaggregate"},
      {" --mesh tp=4 --disaggregate 2:1 --rate 1", "--disaggregate"},
      {" --mesh tp=1 --rate 1", "does not fit"},
      {" --mesh tp=8 --rate 1 --router random", "--router"},
      {" --mesh tp=8 --rate 1 --dtype fp32", "--dtype"},
      {" --mesh tp=8 --rate 1 --block-size 0", "--block-size"},
      {" --mesh tp=8 --rate 1 --gpu-memory-utilization 1.5", "--gpu-memory-utilization"},
      {" --mesh tp=8 --traffic /nonexistent.csv", "nonexistent"},
      {" --search --rate 1", "--gpus"},
      {" --search --gpus 64 --rate 1", "--gpus"},
      {" --mesh tp=8 --concurrency 4 --rate 1", "--rate"},
      {" --mesh tp=3 --rate 1", "--mesh"},
      {" --mesh tp=8 --concurrency 0 --think-time 1", "--think-time"},
      {" --mesh tp=8 --concurrency -2", "--concurrency"},
      {" --mesh tp=8 --concurrency 8 --requests 8", "--requests"},
      {" --mesh tp=8 --concurrency 4 --think-time soon", "--think-time"},
      {" --mesh tp=8 --concurrency 4 --think-time exp:-1", "--think-time"},
      {" --mesh tp=8 --concurrency 100000 --traffic " + source_path("workloads/traffic/chat.csv"),
       "warm-up"},
      {" --mesh tp=8 --rate 1 --engine sglang-9",
       "is neither a bundled engine (sglang, trtllm, vllm)"},
      {" --mesh tp=8 --rate 1 --engine trtllm --watermark 0.05", "--watermark"},
      {" --mesh tp=8 --rate 1 --admission greedy", "--admission"},
      {" --mesh tp=8 --rate 1 --admission reserve", "add --watermark 0"},
      {" --mesh tp=8 --rate 1 --engine " + source_path("workloads/models/llama3.1-8b.json"),
       "llama3.1-8b.json:"},
      {" --mesh tp=8 --rate 1 --prefix-share 0:512", "--prefix-share"},
      {" --mesh tp=8 --rate 1 --prefix-share 512", "--prefix-share"},
      {" --mesh tp=8 --rate 1 --prefix-caching yes", "--prefix-caching"},
      {" --mesh tp=8 --rate 1 --acceptance 0.5", "--acceptance"},
      {" --mesh tp=8 --rate 1 --preemption evict", "--preemption"},
      {" --mesh tp=8 --rate 1 --swap-space -1", "--swap-space"},
      {" --mesh tp=8 --rate 1 --speculative mtp", "--speculative"},
      {" --mesh tp=8 --rate 1 --speculative mtp:0 --acceptance 0.5", "--speculative"},
      {" --mesh tp=8 --rate 1 --speculative mtp:17 --acceptance 0.5", "--speculative"},
      {" --mesh tp=8 --rate 1 --speculative mtp:3", "--acceptance"},
      {" --mesh tp=8 --rate 1 --speculative mtp:3 --acceptance 1.5", "--acceptance"},
      {" --mesh tp=4,pp=2 --rate 1 --speculative mtp:3 --acceptance 0.5", "pp = 1 only"},
      {" --mesh tp=8 --rate 1 --speculative /nonexistent.json:3 --acceptance 0.5", "nonexistent"},
  };
  for (const auto& [args, want] : cases) {
    const auto r = run_cli(kServe70b + args);
    const auto& args_ = args;  // clang 14 cannot capture a structured binding
    INFO(args_);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(r.err.find("error: ") == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("serve --engine: TensorRT-LLM's profile: FP8 KV with FP8 weights, no preemption") {
  const std::string args = kServe70b +
                           " --mesh tp=8 --dtype fp8 --rate inf --requests 400 "
                           "--prompt fixed:2048 --output fixed:512";
  const auto vllm = serve_json(args);
  const auto trt = serve_json(args + " --engine trtllm");
  // vLLM keeps BF16 KV for an FP8 checkpoint (kv_cache_dtype auto); TensorRT-LLM's FP8 recipe
  // stores FP8 KV: half the bytes per token.
  CHECK(trt["kv_cache"]["bytes_per_token_per_gpu"].get<double>() ==
        doctest::Approx(vllm["kv_cache"]["bytes_per_token_per_gpu"].get<double>() / 2));
  CHECK(trt["kv_cache"]["block_size"] == 64);
  CHECK(vllm["kv_cache"]["block_size"] == 16);
  CHECK(trt["preemptions"] == 0);
  CHECK(trt["completed"] == 400);
  // --kv-dtype still overrides the engine's rule; the text output names the engine.
  const auto bf16 = serve_json(args + " --engine trtllm --kv-dtype bf16");
  CHECK(bf16["kv_cache"]["bytes_per_token_per_gpu"] == vllm["kv_cache"]["bytes_per_token_per_gpu"]);
  const auto text = run_cli(args + " --engine trtllm");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("(fp8 weights, fp8 KV, engine trtllm)") != std::string::npos);
  // An engine file works like a bundled name.
  CHECK(serve_json(args + " --engine " + source_path("workloads/engines/trtllm.json")) == trt);
}

TEST_CASE("serve --engine sglang and --admission: SGLang's pool and policy, MAX_UTILIZATION") {
  const std::string args = kServe70b +
                           " --mesh tp=8 --rate inf --requests 300 "
                           "--prompt uniform:256,2048 --output uniform:64,1024";
  const auto sg = serve_json(args + " --engine sglang");
  CHECK(sg["completed"] == 300);
  // The document says what ran.
  CHECK(sg["engine"]["name"] == "sglang");
  CHECK(sg["engine"]["admission"] == "ratio");
  CHECK(sg["engine"]["mixed_batches"] == false);
  CHECK(sg["engine"]["kv_budget"] == "static_fraction");
  CHECK(sg["engine"]["kv_memory_fraction"] == 0.81);
  CHECK(sg["engine"]["prefix_caching"] == true);
  CHECK(sg["kv_cache"]["block_size"] == 1);
  // mem_fraction_static 0.81 at TP 8 of all HBM, less the weights; --gpu-memory-utilization
  // replaces the table.
  const auto half = serve_json(args + " --engine sglang --gpu-memory-utilization 0.6");
  CHECK(half["kv_cache"]["blocks_per_replica"].get<double>() <
        sg["kv_cache"]["blocks_per_replica"].get<double>());
  const auto text = run_cli(args + " --engine sglang");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("engine sglang)") != std::string::npos);
  // An engine file with a bad new field: exit 2, one line naming the file and the JSON path.
  for (const auto& [from, to, path] :
       {std::tuple<std::string, std::string, std::string>{"[2, 0.87]", "[1, 0.87]",
                                                          "/kv_cache/fraction_by_tp/1/0"},
        {"\"min\": 0.098", "\"min\": 0.9", "/scheduler/new_token_ratio/min"},
        {"\"mixed_batches\": false", "\"mixed_batches\": 0", "/scheduler/mixed_batches"}}) {
    std::ifstream in(source_path("workloads/engines/sglang.json"));
    std::string engine_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(engine_text.find(from) != std::string::npos);
    engine_text.replace(engine_text.find(from), from.size(), to);
    const auto file = (std::filesystem::temp_directory_path() / "meshsim_bad_engine.json").string();
    std::ofstream(file) << engine_text;
    const auto bad = run_cli(args + " --engine " + file);
    const auto& path_ = path;  // clang 14 cannot capture a structured binding
    INFO(path_);
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("error: " + file + ":" + path_ + ": ") == 0);
    CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
    std::filesystem::remove(file);
  }
  // Its launch line carries the fraction for the replica's TP.
  const auto line = run_cli(args + " --engine sglang --emit sglang");
  REQUIRE(line.exit_code == 0);
  CHECK(line.err.find("--page-size 1 --mem-fraction-static 0.81") != std::string::npos);
  // TensorRT-LLM with MAX_UTILIZATION: nothing reserved for the outputs, so more run at once
  // and some are paused under a KV cache that guaranteed-no-evict never over-commits.
  const std::string tight = args + " --engine trtllm --gpu-memory-utilization 0.2";
  const auto no_evict = serve_json(tight);
  const auto max_util = serve_json(tight + " --admission max_utilization");
  CHECK(no_evict["preemptions"] == 0);
  CHECK(no_evict["engine"]["admission"] == "reserve");
  CHECK(max_util["preemptions"].get<std::int64_t>() > 0);
  CHECK(max_util["completed"] == 300);
  CHECK(max_util["engine"]["admission"] == "max_utilization");
  CHECK(max_util["engine"]["kv_memory_fraction"] == 0.2);
}

TEST_CASE("serve --concurrency: a closed loop of clients, warm-up left out, Little's law") {
  const auto j = serve_json(kServe70b +
                            " --mesh tp=8 --concurrency 12 --requests 240 --prompt fixed:512 "
                            "--output lognormal:64,0.5");
  CHECK(j["completed"] == 240);
  CHECK(j["peak_in_system"] == 12);
  CHECK(j["warmup_requests"] == 12);
  const double l = j["mean_in_system"].get<double>();
  CHECK(l <= 12.0);
  CHECK(l > 10.0);
  CHECK(l == doctest::Approx(j["throughput"]["requests_per_s"].get<double>() *
                             j["e2e_s"]["mean"].get<double>())
                 .epsilon(0.05));
  // Think time between requests: fewer in the system.
  const auto t = serve_json(kServe70b +
                            " --mesh tp=8 --concurrency 12 --requests 240 --prompt fixed:512 "
                            "--output lognormal:64,0.5 --think-time exp:2");
  CHECK(t["mean_in_system"].get<double>() < 0.8 * l);
  const auto text = run_cli(kServe70b + " --mesh tp=8 --concurrency 12 --requests 240");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("closed loop of 12 clients") != std::string::npos);
}

TEST_CASE("serve --prefix-share --prefix-caching: cached prefixes cut TTFT, reported") {
  const std::string args = kServe70b +
                           " --mesh tp=8 --rate 2 --requests 200 --prompt fixed:3000 "
                           "--output fixed:64 --prefix-share 4:2048";
  const auto off = serve_json(args);
  const auto on = serve_json(args + " --prefix-caching on");
  CHECK_FALSE(off["prefix_cache"]["enabled"].get<bool>());
  CHECK(off["notes"].dump().find("prefix caching is off") != std::string::npos);
  const auto& pc = on["prefix_cache"];
  CHECK(pc["enabled"].get<bool>());
  CHECK(pc["queried_tokens"] == 200 * 3000);
  // Four groups: all but each group's first request hit 2048 of 3000 tokens.
  CHECK(pc["hit_tokens"] == 196 * 2048);
  CHECK(pc["saved_prefill_tokens"] == pc["hit_tokens"]);
  CHECK(pc["hit_requests"] == 196);
  CHECK(pc["ttft_hit_s"]["mean"].get<double>() < 0.6 * pc["ttft_miss_s"]["mean"].get<double>());
  CHECK(on["ttft_s"]["p50"].get<double>() < 0.6 * off["ttft_s"]["p50"].get<double>());
  // A trace's own prefix columns are used as they are; the flag cannot replace them.
  const auto dir = std::filesystem::temp_directory_path();
  const auto trace = (dir / "meshsim_prefix_trace.csv").string();
  {
    std::ofstream f(trace);
    f << "arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n";
    for (int i = 0; i < 40; ++i) f << 0.5 * i << ",1000,16," << (i % 2) << ",640\n";
  }
  const auto t = serve_json(kServe70b + " --mesh tp=8 --prefix-caching on --traffic " + trace);
  CHECK(t["prefix_cache"]["hit_tokens"] == 38 * 640);
  const auto both = run_cli(kServe70b + " --mesh tp=8 --prefix-share 2:64 --traffic " + trace);
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("--prefix-share") != std::string::npos);
  const auto text = run_cli(args + " --prefix-caching on");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("prefix cache: ") != std::string::npos);
  CHECK(text.out.find("4 prefix groups of 2048 tokens") != std::string::npos);
  std::filesystem::remove(trace);
}

TEST_CASE("serve --speculative: an MTP head or a draft model, reported in throughput and ITL") {
  const std::string args = kServe70b +
                           " --mesh tp=8 --rate 1 --requests 60 --prompt fixed:1024 "
                           "--output fixed:128";
  const auto plain = serve_json(args);
  const auto mtp = serve_json(args + " --speculative mtp:3 --acceptance 0.7");
  const auto draft =
      serve_json(args + " --speculative " + source_path("workloads/models/llama3.1-8b.json") +
                 ":4 --acceptance 0.8");
  CHECK_FALSE(plain["speculative"]["enabled"].get<bool>());
  for (const auto* j : {&mtp, &draft}) {
    const auto& sp = (*j)["speculative"];
    CHECK(sp["enabled"].get<bool>());
    CHECK(sp["tokens_per_step"].get<double>() ==
          doctest::Approx(sp["expected_tokens_per_step"].get<double>()).epsilon(0.05));
    CHECK((*j)["tpot_s"]["p50"].get<double>() < 0.75 * plain["tpot_s"]["p50"].get<double>());
    CHECK((*j)["output_tokens"] == plain["output_tokens"]);
  }
  // (1 − 0.7⁴) / 0.3 = 2.533; (1 − 0.8⁵) / 0.2 = 3.362.
  CHECK(mtp["speculative"]["expected_tokens_per_step"].get<double>() ==
        doctest::Approx(2.533).epsilon(1e-3));
  CHECK(draft["speculative"]["expected_tokens_per_step"].get<double>() ==
        doctest::Approx(3.362).epsilon(1e-3));
  // The draft model takes KV memory; the MTP head one layer's worth.
  CHECK(draft["kv_cache"]["blocks_per_replica"] < mtp["kv_cache"]["blocks_per_replica"]);
  CHECK(mtp["kv_cache"]["blocks_per_replica"] < plain["kv_cache"]["blocks_per_replica"]);
  const auto text = run_cli(args + " --speculative mtp:3 --acceptance 0.7");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("speculative: MTP head proposing 3 tokens, acceptance 0.7") !=
        std::string::npos);
  CHECK(text.out.find("speculative decoding: ") != std::string::npos);
  // Seeded: the same command gives the same bytes.
  CHECK(run_cli(args + " --speculative mtp:3 --acceptance 0.7 --json").out ==
        run_cli(args + " --speculative mtp:3 --acceptance 0.7 --json").out);
}

TEST_CASE("serve --preemption swap: preempted sequences go to the host and come back") {
  const std::string args = "serve --topology " + source_path("topologies/dgx-h100.json") +
                           " --workload " + source_path("workloads/models/llama3.1-8b.json") +
                           " --mesh tp=1 --rate inf --requests 96 --prompt uniform:256,1536 "
                           "--output uniform:64,768 --seed 5 --gpu-memory-utilization 0.22";
  const auto rec = serve_json(args);
  const auto swp = serve_json(args + " --preemption swap");
  CHECK(rec["preemptions"].get<int>() > 0);
  CHECK(rec["swap"]["out_blocks"] == 0);
  CHECK(swp["swap"]["out_blocks"].get<int>() > 0);
  CHECK(swp["swap"]["in_blocks"] == swp["swap"]["out_blocks"]);
  CHECK(swp["swap"]["seconds"].get<double>() > 0);
  CHECK(swp["completed"] == 96);
  // No swap space: every preemption recomputes.
  CHECK(serve_json(args + " --preemption swap --swap-space 0")["swap"]["out_blocks"] == 0);
  const auto text = run_cli(args + " --preemption swap");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("swap: ") != std::string::npos);
  // A block is 16 tokens × 2 (K, V) × 32 layers × 8 KV heads × 128 × 2 bytes = 2,097,152 bytes,
  // copied over the GPU's host link: PCIe at 64 GB/s on DGX H100; NVLink-C2C at 225 GB/s on
  // GB200 (which has no PCIe link from the GPU, and refused swap before).
  const double block_bytes = 16.0 * 2 * 32 * 8 * 128 * 2;
  const auto per_block = [](const json& j) {
    const auto& sw = j["swap"];
    return sw["seconds"].get<double>() /
           (sw["out_blocks"].get<double>() + sw["in_blocks"].get<double>());
  };
  CHECK(per_block(swp) == doctest::Approx(block_bytes / 64e9));
  const auto gb200 = serve_json(
      "serve --topology " + source_path("topologies/gb200-nvl72.json") + " --nodes 1 --workload " +
      source_path("workloads/models/llama3.1-8b.json") +
      " --mesh tp=1 --rate inf --requests 96 --prompt uniform:256,1536 --output uniform:64,768 "
      "--seed 5 --gpu-memory-utilization 0.1 --preemption swap");
  REQUIRE(gb200["swap"]["out_blocks"].get<int>() > 0);
  CHECK(per_block(gb200) == doctest::Approx(block_bytes / 225e9));
}

TEST_CASE(
    "serve: the trace nests exactly, names stage threads, and has per-replica KV and requests") {
  const auto trace =
      (std::filesystem::temp_directory_path() / "meshsim_serve_nesting.json").string();
  const auto r = run_cli(kServe70b +
                         " --mesh tp=2,pp=2 --replicas 2 --rate 6 --requests 300 "
                         "--prompt uniform:100,3000 --output uniform:10,300 --trace " +
                         trace);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto t = json::parse(slurp(trace));
  std::map<std::pair<int, int>, std::vector<std::pair<long long, long long>>> lanes;
  std::set<std::string> thread_names, kinds;
  std::set<int> kv_pids;
  std::map<long long, int> open;  // async request id → begin − end
  int begins = 0, firsts = 0;
  auto ns = [](const json& v) { return std::llround(v.get<double>() * 1000); };
  for (const auto& e : t["traceEvents"]) {
    const auto ph = e["ph"].get<std::string>();
    if (ph == "M" && e["name"] == "thread_name")
      thread_names.insert(e["args"]["name"].get<std::string>());
    if (ph == "X") {
      kinds.insert(e["name"].get<std::string>());
      const auto start = ns(e["ts"]);
      lanes[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({start, start + ns(e["dur"])});
    }
    if (ph == "C" && e["name"] == "kv_used") kv_pids.insert(e["pid"].get<int>());
    if (ph == "b") {
      ++begins;
      ++open[e["id"].get<long long>()];
    }
    if (ph == "e") --open[e["id"].get<long long>()];
    if (ph == "n") ++firsts;
  }
  // A stage runs one iteration at a time: in time order, each starts at or after the last ends
  // (to the nanosecond: the times are whole nanoseconds).
  std::size_t overlaps = 0, slices = 0;
  for (auto& [lane, v] : lanes) {
    std::sort(v.begin(), v.end());
    slices += v.size();
    for (std::size_t i = 1; i < v.size(); ++i) overlaps += v[i].first < v[i - 1].second ? 1 : 0;
  }
  CHECK(slices > 200);
  CHECK(overlaps == 0);
  CHECK(lanes.size() == 4);  // 2 replicas × 2 stages
  CHECK(thread_names == std::set<std::string>{"stage 0", "stage 1"});
  CHECK(kinds.contains("decode"));
  CHECK(kv_pids == std::set<int>{0, 1});
  CHECK(begins == 300);
  CHECK(firsts == 300);
  for (const auto& [id, balance] : open) CHECK(balance == 0);
}
