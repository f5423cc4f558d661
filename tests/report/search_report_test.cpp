#include "report/search_report.hpp"

#include <doctest/doctest.h>

#include <sstream>

using namespace meshsim;

namespace {

EvaluatedCandidate layout(std::int64_t tp, std::int64_t dp, double step_s) {
  EvaluatedCandidate e;
  e.candidate.config.mesh = {dp, tp, 1, 1, 1, 0};
  e.result.step_time_s = step_s;
  e.result.compute_s = step_s;
  for (const char* g : {"tp", "dp", "pp", "cp", "ep"}) e.result.exposed_comm_s[g] = 0;
  e.result.memory.weights = 10e9;
  return e;
}

// Two layouts, 1.0 s and 1.25 s, and a third the simulation refused.
SearchResult ranked() {
  SearchResult r;
  r.enumeration.total = 7;
  r.enumeration.rejected = {{"does not fit", 4}};
  r.results = {layout(8, 1, 1.0), layout(4, 2, 1.25), layout(2, 4, 0)};
  r.results[2].error = "no route";
  return r;
}

SearchRun run_of(const SearchResult& r) {
  SearchRun run;
  run.model = "m";
  run.cluster = "c";
  run.gpu = "G";
  run.gpus = 8;
  run.job = {4096, 64, DType::bf16, true};
  run.kernel_model = "k";
  run.stack = "megatron";
  run.result = &r;
  return run;
}

}  // namespace

TEST_CASE("search text: header, ranked rows, how the seed heuristic compares") {
  const auto r = ranked();
  auto run = run_of(r);
  run.heuristic_label = r.results[1].candidate.label();
  run.heuristic_rule = "rule";
  run.heuristic_rank = 2;
  auto text = search_text(run);
  CHECK(text.find("# meshsim search: m on c (8 × G), seq 4096, global batch 64, bf16\n") == 0);
  CHECK(text.find("# stack: megatron\n# 7 combinations; 4 does not fit; 3 simulated\n") !=
        std::string::npos);
  CHECK(text.find("tp=8 pp=1 cp=1 dp=1") != std::string::npos);
  CHECK(text.find("no route") == std::string::npos);  // refused layouts are not ranked rows
  // 1.25 s against 1.0 s: 25 % slower.
  CHECK(text.find(" → rank 2 of 3, 25.0% slower than the winner\n") != std::string::npos);
  run.heuristic_rank = 2;
  run.heuristic_rank_exact = false;
  run.top_k = 1;
  text = search_text(run);
  CHECK(text.find("→ outside the top 1, 25.0% slower than the winner") != std::string::npos);
  run.stacks_compared = {"megatron", "torchtitan"};
  CHECK(search_text(run).find("# stacks compared: megatron, torchtitan\n") != std::string::npos);
  // Outside the searched space (a pinned dimension left it out) it can be faster: 0.8 s against
  // 1.0 s is 20 % faster, said so.
  const auto outside = layout(1, 8, 0.8);
  run.heuristic_rank = 0;
  run.heuristic_eval = &outside;
  CHECK(search_text(run).find("→ not in the searched space; simulated 0.800 s, 20.0% faster than "
                              "the winner\n") != std::string::npos);
  // Layouts kept only with layers moved off a stage: a header line (none above) and a JSON key.
  CHECK(search_text(run).find("moved off a stage") == std::string::npos);
  auto moved = ranked();
  moved.enumeration.moved_layers = 2;
  run.result = &moved;
  CHECK(search_text(run).find("# 7 combinations; 4 does not fit; 3 simulated\n# 2 kept layouts "
                              "fit memory only with layers moved off a stage by the stack's end "
                              "switches (its own split does not fit)\n") != std::string::npos);
  CHECK(search_json(run)["moved_layers"] == 2);
}

TEST_CASE("search text: nothing fits, or nothing was simulated before the search stopped") {
  SearchResult r;
  r.results = {layout(8, 1, 0)};
  r.results[0].error = "out of memory";
  auto run = run_of(r);
  CHECK(search_text(run).find("no candidate fits this cluster") != std::string::npos);
  run.skipped = 1;
  run.stopped = "interrupted";
  const auto text = search_text(run);
  CHECK(text.find("# stopped early (interrupted)\n") != std::string::npos);
  CHECK(text.find("no layout was simulated before the search stopped\n") != std::string::npos);
}

TEST_CASE("search JSON and CSV: every layout in rank order, an error instead of metrics") {
  const auto r = ranked();
  auto run = run_of(r);
  run.heuristic_label = "h";
  run.heuristic_rank = 2;
  run.heuristic_rank_exact = false;
  const auto j = search_json(run);
  CHECK(j["candidates"] == 7);
  CHECK(j["rejected"]["does not fit"] == 4);
  REQUIRE(j["results"].size() == 3);
  CHECK(j["results"][1]["rank"] == 2);
  CHECK(j["results"][1]["step_time_s"] == 1.25);
  CHECK(j["results"][2]["error"] == "no route");
  CHECK_FALSE(j["results"][2].contains("step_time_s"));
  CHECK(j["heuristic"]["rank"].is_null());  // not exact: null, with its step
  CHECK(j["heuristic"]["step_s"] == 1.25);
  std::ostringstream csv;
  write_search_csv(r.results, csv);
  std::istringstream lines(csv.str());
  std::string header, first, second, third;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  std::getline(lines, third);
  CHECK(header.rfind("rank,tp,pp,cp,dp,ep,fsdp,zero,", 0) == 0);
  CHECK(first.rfind("1,8,1,1,1,1,1,0,", 0) == 0);
  CHECK(second.rfind("2,4,1,1,2,1,2,0,", 0) == 0);
  CHECK(third.substr(third.size() - 10) == "\"no route\"");
}
