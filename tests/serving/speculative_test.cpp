// Speculative decoding: the acceptance arithmetic, draft and verify steps priced by hand, and
// what it does to a simulation at acceptance 0 and 1.
#include "serving/speculative.hpp"

#include <doctest/doctest.h>

#include "core/error.hpp"
#include "serving/serving_sim.hpp"
#include "serving_fixture.hpp"

namespace meshsim::test {
namespace {

// n requests, each alone in the system.
std::vector<Request> one_request_each(std::int64_t n, std::int64_t prompt, std::int64_t output) {
  return make_requests("0.001", n, "fixed:" + std::to_string(prompt),
                       "fixed:" + std::to_string(output));
}

ServingSetup with_mtp(std::int64_t k, double acceptance) {
  ServingSetup s;
  s.check_invariants = true;
  s.speculative.proposer = Proposer::mtp;
  s.speculative.tokens = k;
  s.speculative.acceptance = acceptance;
  return s;
}

}  // namespace

TEST_CASE("speculative decoding: tokens per step (1 − α^(K+1)) / (1 − α), seeded draws") {
  SpeculativeDecoding s;
  s.proposer = Proposer::mtp;
  s.tokens = 3;
  s.acceptance = 0.5;
  CHECK(s.expected_tokens_per_step() == doctest::Approx(1.875));  // 1 + ½ + ¼ + ⅛
  s.acceptance = 1;
  CHECK(s.expected_tokens_per_step() == 4);
  s.acceptance = 0;
  CHECK(s.expected_tokens_per_step() == 1);
  Rng rng(7);
  CHECK(accepted_drafts(rng, 1.0, 5) == 5);
  CHECK(accepted_drafts(rng, 0.0, 5) == 0);
  // Mean accepted of 3 at α = 0.5: ½ + ¼ + ⅛ = 0.875.
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(accepted_drafts(rng, 0.5, 3));
  CHECK(sum / n == doctest::Approx(0.875).epsilon(0.01));
  Rng a(3), b(3);
  for (int i = 0; i < 100; ++i) CHECK(accepted_drafts(a, 0.6, 4) == accepted_drafts(b, 0.6, 4));
}

TEST_CASE(
    "speculative decoding at acceptance 1 emits K + 1 tokens per verify step, priced by hand") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-8b.json"));
  // 1 + 4·10 output tokens: the prefill's token, then ten verify steps of 3 drafts + 1.
  const auto reqs = one_request_each(2, 1024, 41);
  const auto s = with_mtp(3, 1.0);
  const auto r = simulate_serving(topo, model, s, reqs);
  CHECK(r.completed == 2);
  CHECK(r.speculative.enabled);
  CHECK(r.speculative.steps == 20);
  CHECK(r.speculative.tokens_per_step == 4);
  CHECK(r.speculative.acceptance_rate == 1);
  CHECK(r.output_tokens == 82);
  // By hand: verify step j of a request checks 4 positions after 1024 + 4(j − 1) cached tokens;
  // the MTP head drafted them in 3 passes first.
  ReplicaFixture f("dgx-h100.json", "llama3.1-8b.json", ReplicaShape{});
  DraftCost draft(f.topo, s.speculative, ReplicaShape{}, {0}, f.compute, f.comm, *f.cost);
  double steps = 0;
  for (std::int64_t j = 1; j <= 10; ++j) {
    BatchShape b;
    b.decodes = 1;
    b.speculated = 3;
    b.draft_passes = 3;
    b.sampled = 4;
    b.decode_context = 1024 + 4 * (j - 1) + 4;
    steps += Time::from_seconds_ceil(f.cost->stage_seconds(0, b) + draft.seconds(b)).seconds();
  }
  CHECK(r.tpot.mean == doctest::Approx(steps / 40).epsilon(1e-9));
  // One gap per verify step: a streaming client gets each step's tokens together.
  CHECK(r.itl.mean == doctest::Approx(steps / 10).epsilon(1e-3));
  // Three MTP passes: each one layer, the ends (embedding, norm, LM head, sampling).
  BatchShape pass;
  pass.decodes = 1;
  pass.decode_context = 1025;
  pass.sampled = 1;
  BatchShape verify = pass;
  verify.speculated = 3;
  verify.draft_passes = 3;
  verify.sampled = 4;
  verify.decode_context = 1028;
  double passes = 0;
  for (std::int64_t j = 1; j <= 3; ++j) {
    pass.decode_context = 1024 + j;
    passes += f.cost->layer_pass_seconds(pass) + f.cost->ends_seconds(0, pass);
  }
  CHECK(draft.seconds(verify) == doctest::Approx(passes).epsilon(1e-12));
  CHECK(passes < 0.25 * f.cost->stage_seconds(0, one_decode(1025)));
}

TEST_CASE("speculative decoding at acceptance 0 costs more than none; a draft model's memory") {
  const auto topo = load_topology(topology_path("dgx-h100.json"));
  const auto model = load_model(source_path("workloads/models/llama3.1-70b.json"));
  const auto reqs = one_request_each(3, 512, 64);
  ServingSetup plain;
  plain.shape.tp = 8;
  plain.check_invariants = true;
  const auto none = simulate_serving(topo, model, plain, reqs);
  auto s = with_mtp(4, 0.0);
  s.shape.tp = 8;
  const auto zero = simulate_serving(topo, model, s, reqs);
  CHECK(zero.speculative.tokens_per_step == 1);
  CHECK(zero.speculative.accepted == 0);
  CHECK(zero.tpot.mean > none.tpot.mean);
  CHECK(zero.output_tokens == none.output_tokens);
  s.speculative.acceptance = 0.8;
  const auto good = simulate_serving(topo, model, s, reqs);
  CHECK(good.tpot.mean < 0.6 * none.tpot.mean);
  CHECK(good.speculative.tokens_per_step > 2.5);

  // A draft model: its weights and KV come out of the target's KV budget; it prefills too.
  auto d = s;
  d.speculative.proposer = Proposer::draft_model;
  d.speculative.draft = load_model(source_path("workloads/models/llama3.1-8b.json"));
  const auto cap = kv_capacity(topo, model, d), base = kv_capacity(topo, model, plain);
  const auto mtp = kv_capacity(topo, model, s);
  CHECK(cap.memory.weights == doctest::Approx(base.memory.weights + 16.06e9 / 8).epsilon(0.01));
  CHECK(cap.kv_bytes_per_token_rank ==
        doctest::Approx(base.kv_bytes_per_token_rank + 131072.0 / 8).epsilon(1e-9));
  CHECK(mtp.kv_bytes_per_token_rank ==
        doctest::Approx(base.kv_bytes_per_token_rank * 81.0 / 80).epsilon(1e-9));
  CHECK(cap.blocks < mtp.blocks);
  const auto dr = simulate_serving(topo, model, d, reqs);
  CHECK(dr.completed == 3);
  CHECK(dr.ttft.mean > none.ttft.mean);  // the draft model prefills the prompt as well
  // Refused where not modelled.
  d.shape.pp = 2;
  d.shape.tp = 4;
  CHECK_THROWS_WITH_AS(kv_capacity(topo, model, d), doctest::Contains("pp = 1 only"), Error);
}

}  // namespace meshsim::test
