// Automatic prefix caching: the cache's LRU semantics, the scheduler skipping exactly the cached
// blocks' prefill, and a whole simulation's hit rate and TTFT by hand.
#include "serving/prefix_cache.hpp"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "serving/scheduler.hpp"
#include "serving/serving_sim.hpp"
#include "serving_fixture.hpp"

namespace meshsim::test {
namespace {

RequestState request(std::int64_t prompt, std::int64_t output, std::int64_t group,
                     std::int64_t prefix) {
  RequestState r;
  r.prompt = prompt;
  r.output = output;
  r.prefix_group = group;
  r.prefix_tokens = prefix;
  return r;
}

}  // namespace

TEST_CASE("prefix cache: leading matches, holders, least recently released evicted first") {
  PrefixCache c;
  CHECK(c.match(0, 4).blocks == 0);
  CHECK(c.insert(0, 0));
  CHECK(c.insert(0, 1));
  CHECK_FALSE(c.insert(0, 1));  // a second copy stays private
  CHECK(c.insert(0, 3));        // block 2 missing: 3 is cached but not a leading match
  CHECK(c.match(0, 8).blocks == 2);
  CHECK(c.match(0, 1).blocks == 1);
  CHECK(c.match(1, 8).blocks == 0);
  CHECK(c.idle() == 0);
  c.release(0, 1);
  c.release(0, 0);
  c.release(0, 3);
  CHECK(c.idle() == 3);
  CHECK(c.match(0, 8).idle == 2);
  c.acquire(0, 0);  // held again: not evictable
  CHECK(c.idle() == 2);
  c.evict(1);  // block 1 was released first
  CHECK(c.match(0, 8).blocks == 1);
  CHECK(c.size() == 2);
  c.evict(1);  // then block 3
  CHECK(c.size() == 1);
  CHECK_THROWS_AS(c.evict(1), std::logic_error);
  c.release(0, 0);
  CHECK_THROWS_AS(c.release(0, 0), std::logic_error);
}

TEST_CASE("prefix hits skip exactly the cached blocks' prefill") {
  SchedulerOptions opt;
  opt.prefix_caching = true;
  opt.watermark = 0;
  opt.max_batch_tokens = 4096;
  ReplicaScheduler s(opt, 100);  // 100 blocks of 16 tokens
  // A shares 100 tokens of group 7: its 6 full blocks (96 tokens) are cached once computed.
  std::vector<RequestState> reqs = {request(300, 2, 7, 100), request(200, 2, 7, 100),
                                    request(97, 2, 7, 97), request(96, 2, 7, 96),
                                    request(200, 2, 8, 100)};
  s.enqueue(0);
  auto b = step_by_hand(s, reqs);
  REQUIRE(b.entries.size() == 1);
  CHECK(b.entries[0].tokens == 300);
  CHECK(b.entries[0].context == 0);
  CHECK(s.cache().size() == 6);
  CHECK(reqs[0].shared.size() == 6);
  CHECK(reqs[0].blocks == 19);  // ⌈300/16⌉, six of them shared
  // B: 96 tokens from the cache, the other 104 prefilled after them.
  s.enqueue(1);
  // C: a 97-token prompt that is all prefix: 6 blocks hit, 1 token computed.
  s.enqueue(2);
  // D: a 96-token prompt that is all prefix: at most prompt − 1 tokens may hit → 5 blocks (80).
  s.enqueue(3);
  // E: another group: nothing cached.
  s.enqueue(4);
  b = step_by_hand(s, reqs);
  std::map<std::int32_t, BatchEntry> by;
  for (const auto& e : b.entries) by[e.request] = e;
  CHECK(by.at(1).tokens == 104);
  CHECK(by.at(1).context == 96);
  CHECK(by.at(2).tokens == 1);
  CHECK(by.at(2).context == 96);
  CHECK(by.at(3).tokens == 16);
  CHECK(by.at(3).context == 80);
  CHECK(by.at(4).tokens == 200);
  CHECK(by.at(4).context == 0);
  CHECK(s.prefix_hit_tokens() == 96 + 96 + 80);
  CHECK(s.prefix_queried_tokens() == 300 + 200 + 97 + 96 + 200);
  // Blocks: shared ones are counted once in the pool.
  std::int64_t priv = 0;
  for (const auto& r : reqs) priv += r.private_blocks();
  CHECK(s.pool().used() == priv + s.cache().size());
  // Finish everything: the cached blocks stay, idle, and count as free for usage.
  for (int i = 0; i < 20; ++i) step_by_hand(s, reqs);
  for (const auto& r : reqs) CHECK(r.generated == r.output);
  CHECK(s.running().empty());
  CHECK(s.cache().idle() == s.cache().size());
  CHECK(s.cache().size() == 6 + 6);  // groups 7 and 8, six blocks each
  CHECK(s.blocks_in_use() == 0);
  CHECK(s.pool().used() == 12);
}

TEST_CASE("prefix caching: a full cache evicts idle prefix blocks to admit new requests") {
  SchedulerOptions opt;
  opt.prefix_caching = true;
  opt.watermark = 0;
  ReplicaScheduler s(opt, 10);  // 160 tokens
  std::vector<RequestState> reqs = {request(64, 1, 0, 64), request(64, 1, 1, 64),
                                    request(150, 1, 2, 0)};
  for (std::int32_t i = 0; i < 2; ++i) {
    s.enqueue(i);
    step_by_hand(s, reqs);
  }
  CHECK(s.cache().size() == 8);  // 4 + 4 idle prefix blocks after both finished
  CHECK(s.pool().free() == 2);
  // 150 tokens need 10 blocks: 2 never used, then the 8 cached ones, oldest first.
  s.enqueue(2);
  const auto b = step_by_hand(s, reqs);
  REQUIRE(b.entries.size() == 1);
  CHECK(b.entries[0].tokens == 150);
  CHECK(s.cache().size() == 0);
}

TEST_CASE("prefix caching in a simulation: hit rate, saved prefill, TTFT of a hit by hand") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  // One group: every request after the first finds 1536 of its 2048 prompt tokens cached.
  const auto reqs = make_requests("0.01", 5, "fixed:2048", "fixed:4", 1,
                                  PrefixShare{.groups = 1, .tokens = 1536});
  for (const auto& r : reqs) CHECK(r.prefix_tokens == 1536);
  ServingSetup s;
  s.check_invariants = true;
  s.scheduler.prefix_caching = true;
  const auto r = simulate_serving(topo, model, s, reqs);
  CHECK(r.completed == 5);
  CHECK(r.prefix_cache.enabled);
  CHECK(r.prefix_cache.queried_tokens == 5 * 2048);
  CHECK(r.prefix_cache.hit_tokens == 4 * 1536);
  CHECK(r.prefix_cache.hit_rate == doctest::Approx(4.0 * 1536 / (5 * 2048)));
  CHECK(r.prefix_cache.hit_requests == 4);
  CHECK(r.prefix_cache.miss_requests == 1);
  // A hit's TTFT is one prefill of the other 512 tokens after 1536 cached, plus host work.
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  BatchShape chunk;
  chunk.prefill.push_back(PrefillChunk{.tokens = 512, .context = 1536});
  chunk.sampled = 1;
  BatchShape full;
  full.prefill.push_back(PrefillChunk{.tokens = 2048, .context = 0});
  full.sampled = 1;
  const auto ttft = [&](const BatchShape& b) {
    return Time::from_seconds_ceil(f.cost->stage_seconds(0, b) + s.scheduler.cpu_seconds(1, 1))
        .seconds();
  };
  CHECK(r.prefix_cache.ttft_hit.mean == doctest::Approx(ttft(chunk)).epsilon(1e-9));
  CHECK(r.prefix_cache.ttft_miss.mean == doctest::Approx(ttft(full)).epsilon(1e-9));
  CHECK(ttft(chunk) < 0.4 * ttft(full));
  // Off: the same requests prefill in full and say why.
  s.scheduler.prefix_caching = false;
  const auto off = simulate_serving(topo, model, s, reqs);
  CHECK_FALSE(off.prefix_cache.enabled);
  CHECK(off.ttft.mean == doctest::Approx(ttft(full)).epsilon(1e-9));
  CHECK(off.notes.size() == 1);
}

TEST_CASE("prefix caching conserves KV blocks under preemption and disaggregation") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  const auto reqs = make_requests("inf", 96, "uniform:256,1536", "uniform:64,768", 5,
                                  PrefixShare{.groups = 3, .tokens = 512});
  ServingSetup s;
  s.check_invariants = true;  // blocks: private + in transfer + cached = used, after every event
  s.scheduler.prefix_caching = true;
  s.scheduler.gpu_memory_utilization = 0.22;
  SUBCASE("preemption by recompute") {
    const auto r = simulate_serving(topo, model, s, reqs);
    CHECK(r.completed == 96);
    CHECK(r.preemptions > 0);
    CHECK(r.prefix_cache.hit_tokens > 0);
    CHECK(r.idle_with_work == 0);
  }
  SUBCASE("disaggregated") {
    s.prefill_replicas = 1;
    s.decode_replicas = 2;
    const auto r = simulate_serving(topo, model, s, reqs);
    CHECK(r.completed == 96);
    CHECK(r.prefix_cache.hit_tokens > 0);
    CHECK(r.idle_with_work == 0);
  }
}

TEST_CASE("prefix shares: the flag's form, seeded groups, trace columns") {
  const auto p = parse_prefix_share("16:1024", "", "--prefix-share");
  CHECK(p.groups == 16);
  CHECK(p.tokens == 1024);
  for (const char* bad : {"16", "0:10", "4:0", "4:1.5", "x:4", "2000000:4", "4:99999999"})
    CHECK_THROWS_WITH_AS(parse_prefix_share(bad, "", "--prefix-share"),
                         doctest::Contains("--prefix-share"), Error);
  std::vector<Request> a(200), b;
  for (auto& r : a) r.prompt_tokens = 700;
  a[3].prompt_tokens = 10;
  b = a;
  apply_prefix_share(a, PrefixShare{.groups = 4, .tokens = 512}, 9);
  apply_prefix_share(b, PrefixShare{.groups = 4, .tokens = 512}, 9);
  std::set<std::int64_t> groups;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].prefix_group == b[i].prefix_group);
    groups.insert(a[i].prefix_group);
  }
  CHECK(groups == std::set<std::int64_t>{0, 1, 2, 3});
  CHECK(a[0].prefix_tokens == 512);
  CHECK(a[3].prefix_tokens == 10);  // never longer than the prompt

  std::istringstream ok(
      "arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n"
      "0,100,5,3,64\n0.5,100,5,,0\n1,100,5,-1,0\n");
  const auto t = read_trace_csv(ok, "t.csv");
  REQUIRE(t.size() == 3);
  CHECK(t[0].prefix_group == 3);
  CHECK(t[0].prefix_tokens == 64);
  CHECK(t[1].prefix_group == -1);
  CHECK(t[2].prefix_group == -1);
  const std::pair<const char*, const char*> bad[] = {
      {"arrival_s,prompt_tokens,output_tokens,prefix_group\n0,1,1,0\n", "give both or neither"},
      {"arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n0,10,1,0,11\n",
       "line 2: prefix_tokens"},
      {"arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens\n0,10,1,-2,1\n",
       "line 2: prefix_group"},
  };
  for (const auto& [text, want] : bad) {
    std::istringstream in(text);
    CHECK_THROWS_WITH_AS(read_trace_csv(in, "t.csv"), doctest::Contains(want), Error);
  }
}

}  // namespace meshsim::test
