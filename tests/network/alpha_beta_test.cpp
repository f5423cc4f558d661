#include "network/alpha_beta.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "core/rng.hpp"
#include "json_near.hpp"
#include "network/link_calibration.hpp"
#include "test_paths.hpp"
#include "topology/topology_loader.hpp"

using namespace meshsim;

namespace {

// t = α + S/β with ±`noise` relative, deterministic.
std::vector<AlphaBetaPoint> synthetic(double alpha, double beta, double lo, double hi, double noise,
                                      std::uint64_t seed) {
  Rng rng(seed);
  std::vector<AlphaBetaPoint> pts;
  for (double s = lo; s <= hi; s *= 2) {
    const double e = 1 + noise * (2 * rng.uniform01() - 1);
    pts.push_back({s, (alpha + s / beta) * e});
  }
  return pts;
}

}  // namespace

TEST_CASE("α-β least squares recovers a known latency and bandwidth through noise") {
  const auto exact = fit_alpha_beta(synthetic(20e-6, 300e9, 8, 8.0 * (1 << 30), 0, 1));
  CHECK(exact.alpha_s == doctest::Approx(20e-6).epsilon(1e-9));
  CHECK(exact.bandwidth_Bps == doctest::Approx(300e9).epsilon(1e-9));
  CHECK(exact.max_relative_error < 1e-9);
  const auto noisy = fit_alpha_beta(synthetic(20e-6, 300e9, 8, 8.0 * (1 << 30), 0.03, 7));
  CHECK(noisy.alpha_s == doctest::Approx(20e-6).epsilon(0.05));
  CHECK(noisy.bandwidth_Bps == doctest::Approx(300e9).epsilon(0.05));
  CHECK(noisy.max_relative_error < 0.08);
  // One point: through the origin.
  const AlphaBetaPoint one[] = {{1e6, 1e-3}};
  const auto o = fit_alpha_beta(one);
  CHECK(o.alpha_s == 0);
  CHECK(o.bandwidth_Bps == doctest::Approx(1e9));
  CHECK_THROWS(fit_alpha_beta(std::vector<AlphaBetaPoint>{}));
}

TEST_CASE("α-β regimes: each message-size regime gets its own fit") {
  // LL-like below 64 KiB (5 µs, 20 GB/s), LL128 to 8 MiB (10 µs, 150 GB/s), Simple above
  // (40 µs, 270 GB/s).
  auto pts = synthetic(5e-6, 20e9, 8, 32768, 0.01, 1);
  for (auto p : synthetic(10e-6, 150e9, 65536, 4.0 * (1 << 20), 0.01, 2)) pts.push_back(p);
  for (auto p : synthetic(40e-6, 270e9, 8.0 * (1 << 20), 8.0 * (1 << 30), 0.01, 3))
    pts.push_back(p);
  const auto r = fit_regimes(pts);
  REQUIRE(r.size() == 3);
  CHECK(r[0].min_bytes == 0);
  CHECK(r[1].min_bytes == 65536);
  CHECK(r[2].min_bytes == 8.0 * (1 << 20));
  CHECK(std::isinf(r[2].max_bytes));
  CHECK(r[0].bandwidth_Bps == doctest::Approx(20e9).epsilon(0.05));
  CHECK(r[1].bandwidth_Bps == doctest::Approx(150e9).epsilon(0.05));
  CHECK(r[2].bandwidth_Bps == doctest::Approx(270e9).epsilon(0.03));
  CHECK(r[2].alpha_s == doctest::Approx(40e-6).epsilon(0.2));
  CHECK(regime_seconds(r, 1e9) == doctest::Approx(r[2].seconds(1e9)));
  CHECK(regime_seconds(r, 100) == doctest::Approx(r[0].seconds(100)));
  // A regime with fewer than two points merges into its neighbour.
  const auto merged = fit_regimes(synthetic(5e-6, 100e9, 1 << 20, 1 << 22, 0, 1));
  CHECK(merged.size() == 1);
}

TEST_CASE("link calibration: JSON round trip and strict reading") {
  LinkCalibration c;
  c.p2p.push_back({LinkKind::nvlink, fit_regimes(synthetic(10e-6, 370e9, 1024, 1 << 30, 0, 1))});
  c.collectives.push_back(
      {CollectiveOp::all_reduce, 8, 1, fit_regimes(synthetic(15e-6, 270e9, 8, 1 << 30, 0, 2))});
  const Json j = to_json(c);
  const auto back = read_link_calibration(JsonRef::root(j, "c.json"));
  CHECK(meshsim::test::json_near(to_json(back), j));
  Json bad = j;
  bad["collectives"][0]["regimes"][1]["min_bytes"] = 12345;
  CHECK_THROWS_WITH_AS(read_link_calibration(JsonRef::root(bad, "c.json")),
                       doctest::Contains("/collectives/0/regimes/1"), Error);
  bad = j;
  bad["p2p"][0]["class"] = "carrier_pigeon";
  CHECK_THROWS_WITH_AS(read_link_calibration(JsonRef::root(bad, "c.json")),
                       doctest::Contains("unknown link class"), Error);
}

TEST_CASE("link calibration moves the network model by the measured amount") {
  auto topo = load_topology(meshsim::test::topology_path("dgx-h100.json"));
  Router router(topo);
  const double model = modelled_p2p_Bps(topo, router, 0, 1);
  // 18 NVLink4 links: 450 GB/s × 0.8 payload efficiency.
  CHECK(model == doctest::Approx(450e9 * 0.8));
  LinkCalibration c;
  c.p2p.push_back({LinkKind::nvlink, {AlphaBetaRegime{0, INFINITY, 10e-6, 2 * model, 5, 0}}});
  const auto lines = apply_p2p_calibration(topo, c);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("scaled by 2.000") != std::string::npos);
  Router after(topo);
  CHECK(modelled_p2p_Bps(topo, after, 0, 1) == doctest::Approx(2 * model));
  // A collective fit: the call's time becomes t × measured / modelled-alone.
  CollectiveCalibration ar{
      CollectiveOp::all_reduce, 8, 1, {AlphaBetaRegime{0, INFINITY, 0, 100e9, 5, 0}}};
  c.collectives.push_back(ar);
  CollectiveCall call{CollectiveOp::all_reduce, {0, 1, 2, 3, 4, 5, 6, 7}, 1e9};
  const Time alone = Time::ms(4);
  CHECK(calibrated_collective_time(c, topo, call, alone, alone).seconds() ==
        doctest::Approx(1e9 / 100e9));
  CHECK(calibrated_collective_time(c, topo, call, alone, Time::ms(8)).seconds() ==
        doctest::Approx(2e-2));  // contention in the model keeps its ratio
  call.ranks = {0, 1, 2, 3};     // no fit for 4 ranks: the model's time
  CHECK(calibrated_collective_time(c, topo, call, alone, alone) == alone);
  // An NCCL all-to-all fit does not price DeepEP's deduplicated dispatch (network share < 1).
  c.collectives.push_back(
      {CollectiveOp::all_to_all, 8, 1, {AlphaBetaRegime{0, INFINITY, 0, 100e9, 5, 0}}});
  CollectiveCall a2a{CollectiveOp::all_to_all, {0, 1, 2, 3, 4, 5, 6, 7}, 1e9};
  CHECK(calibrated_collective_time(c, topo, a2a, alone, alone).seconds() ==
        doctest::Approx(1e9 / 100e9));
  a2a.network_share = 0.5;
  CHECK(calibrated_collective_time(c, topo, a2a, alone, alone) == alone);
}
