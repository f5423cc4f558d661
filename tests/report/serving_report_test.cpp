#include "report/serving_report.hpp"

#include <doctest/doctest.h>

using namespace meshsim;

namespace {

ServingCandidate candidate(std::int64_t replicas, std::int64_t tp, bool meets, double ttft_p99) {
  ServingCandidate c;
  c.shape.tp = tp;
  c.replicas = replicas;
  c.meets_slo = meets;
  c.result.goodput_requests_per_s = 4.5;
  c.result.ttft.p99 = ttft_p99;
  c.result.tpot.p99 = 0.0061;
  c.result.e2e.mean = 1.25;
  c.result.tokens_per_s_per_gpu = 142;
  return c;
}

}  // namespace

TEST_CASE("serve --search report: ranked layouts, refused ones, the verdict and the winner") {
  ServingSearchResult found;
  found.candidates = {candidate(2, 4, true, 0.022), candidate(1, 8, false, 3.5)};
  ServingCandidate refused;
  refused.shape.tp = 1;
  refused.replicas = 8;
  refused.refused = "weights do not fit";
  found.candidates.push_back(refused);
  found.verdict = "replicas win";
  const ServingSearchRun run{"m", "c", "300 requests", 8, 2, 0.2};
  const auto text = serving_search_text(found, run);
  CHECK(text.find("# m on 8 GPUs of c; traffic: 300 requests; SLO p99 TTFT ≤ 2 s, p99 TPOT ≤ 200 "
                  "ms\n") == 0);
  CHECK(text.find("  1 2 × tp=4 pp=1         met      4.50    0.022s      6.1ms    1.250s      "
                  "142.0\n") != std::string::npos);
  CHECK(text.find("  2 1 × tp=8 pp=1      missed      4.50    3.500s") != std::string::npos);
  CHECK(text.find("  3 8 × tp=1 pp=1      refused: weights do not fit\n") != std::string::npos);
  CHECK(text.find("verdict: replicas win\nfastest layout meeting the SLO: 2 × tp=4 pp=1\n") !=
        std::string::npos);
  const auto j = serving_search_json(found);
  CHECK(j["verdict"] == "replicas win");
  REQUIRE(j["candidates"].size() == 3);
  CHECK(j["candidates"][0]["meets_slo"] == true);
  CHECK(j["candidates"][0]["metrics"]["goodput_requests_per_s"] == 4.5);
  CHECK(j["candidates"][2]["refused"] == "weights do not fit");
  CHECK_FALSE(j["candidates"][2].contains("metrics"));
  // No layout meets the SLO (or none fits): said as such.
  found.candidates.erase(found.candidates.begin());
  CHECK(serving_search_text(found, run).find("no layout meets the SLO at this rate\n") !=
        std::string::npos);
  found.candidates.clear();
  CHECK(serving_search_text(found, run).find("no layout meets the SLO at this rate\n") !=
        std::string::npos);
}

TEST_CASE("serve JSON: the metrics with the engine's settings after the flags") {
  ServingResult r;
  r.completed = 7;
  SchedulerOptions sch;
  sch.max_seqs = 64;
  sch.gpu_memory_utilization = 0.9;
  // TensorRT-LLM style: from TP 4 the KV fraction is 0.85.
  sch.memory_fraction_by_tp = {{4, 0.85}};
  sch.admission = Admission::reserve;
  const auto j = serving_run_json(r, "trtllm", sch, 4);
  CHECK(j["completed"] == 7);
  CHECK(j["engine"]["name"] == "trtllm");
  CHECK(j["engine"]["admission"] == "reserve");
  CHECK(j["engine"]["max_seqs"] == 64);
  CHECK(j["engine"]["kv_memory_fraction"] == 0.85);
  CHECK(serving_run_json(r, "trtllm", sch, 2)["engine"]["kv_memory_fraction"] == 0.9);
}
