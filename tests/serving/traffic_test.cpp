#include "serving/traffic.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "test_paths.hpp"

namespace meshsim::test {
namespace {

TrafficSpec spec(ArrivalKind kind, double rate, double cv, std::int64_t n) {
  TrafficSpec s;
  s.arrival.kind = kind;
  s.arrival.rate_per_s = rate;
  s.arrival.cv = cv;
  s.prompt = parse_length_dist("fixed:100", "", "--prompt");
  s.output = parse_length_dist("fixed:10", "", "--output");
  s.requests = n;
  return s;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("length distributions parse and sample within their bounds") {
  Rng rng(1);
  const auto f = parse_length_dist("fixed:1024", "", "--prompt");
  CHECK(f.sample(rng) == 1024);
  CHECK(f.mean() == 1024);
  const auto u = parse_length_dist("uniform:10,20", "", "--prompt");
  std::int64_t lo = 100, hi = 0;
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto v = u.sample(rng);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += static_cast<double>(v);
  }
  CHECK(lo == 10);
  CHECK(hi == 20);
  CHECK(sum / 20000 == doctest::Approx(15).epsilon(0.01));
  const auto ln = parse_length_dist("lognormal:500,0.6", "", "--prompt");
  sum = 0;
  for (int i = 0; i < 50000; ++i) sum += static_cast<double>(ln.sample(rng));
  CHECK(sum / 50000 == doctest::Approx(500).epsilon(0.02));
  for (const char* bad : {"fixed", "fixed:0", "fixed:1.5", "uniform:20,10", "lognormal:100",
                          "lognormal:100,-1", "normal:5", "fixed:abc", "uniform:1,", ""})
    CHECK_THROWS_WITH_AS(parse_length_dist(bad, "", "--prompt"),
                         doctest::Contains("expected fixed:N"), Error);
}

TEST_CASE("samplers have the moments of their distributions") {
  Rng rng(42);
  const int n = 100000;
  double e = 0, z = 0, z2 = 0;
  for (int i = 0; i < n; ++i) {
    e += sample_exponential(rng);
    const double x = sample_normal(rng);
    z += x;
    z2 += x * x;
  }
  CHECK(e / n == doctest::Approx(1).epsilon(0.01));
  CHECK(std::abs(z / n) < 0.01);
  CHECK(z2 / n == doctest::Approx(1).epsilon(0.01));
  for (double k : {0.25, 1.0, 4.0}) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; ++i) {
      const double g = sample_gamma(rng, k);
      s += g;
      s2 += g * g;
    }
    const double mean = s / n, var = s2 / n - mean * mean;
    CHECK(mean == doctest::Approx(k).epsilon(0.02));  // Gamma(k, 1): mean k, variance k
    CHECK(var == doctest::Approx(k).epsilon(0.05));
  }
}

TEST_CASE("arrivals: offline at zero, Poisson and gamma at the asked rate and burstiness") {
  const auto off = generate_requests(spec(ArrivalKind::offline, 1, 1, 100));
  for (const auto& r : off) CHECK(r.arrival == Time::zero());
  const auto measure_cv = [](const std::vector<Request>& reqs) {
    double s = 0, s2 = 0;
    const auto n = static_cast<double>(reqs.size() - 1);
    for (std::size_t i = 1; i < reqs.size(); ++i) {
      const double g = (reqs[i].arrival - reqs[i - 1].arrival).seconds();
      s += g;
      s2 += g * g;
    }
    const double mean = s / n;
    return std::pair{mean, std::sqrt(s2 / n - mean * mean) / mean};
  };
  const auto [pm, pcv] = measure_cv(generate_requests(spec(ArrivalKind::poisson, 5, 1, 50000)));
  CHECK(pm == doctest::Approx(0.2).epsilon(0.02));
  CHECK(pcv == doctest::Approx(1).epsilon(0.03));
  const auto [gm, gcv] = measure_cv(generate_requests(spec(ArrivalKind::gamma, 5, 3, 50000)));
  CHECK(gm == doctest::Approx(0.2).epsilon(0.05));
  CHECK(gcv == doctest::Approx(3).epsilon(0.08));
  // Same seed, same requests; ids in order; arrivals never go back.
  const auto a = generate_requests(spec(ArrivalKind::poisson, 5, 1, 1000));
  const auto b = generate_requests(spec(ArrivalKind::poisson, 5, 1, 1000));
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].arrival == b[i].arrival);
    CHECK(a[i].id == static_cast<std::int64_t>(i));
    if (i > 0) CHECK(a[i].arrival >= a[i - 1].arrival);
  }
  CHECK(arrival_from_rate("inf", 1, "--rate").kind == ArrivalKind::offline);
  CHECK(arrival_from_rate("2.5", 1, "--rate").kind == ArrivalKind::poisson);
  CHECK(arrival_from_rate("2.5", 2, "--rate").kind == ArrivalKind::gamma);
  for (const char* bad : {"0", "-1", "fast", "nan", "1e12"})
    CHECK_THROWS_AS(arrival_from_rate(bad, 1, "--rate"), Error);
}

TEST_CASE("bundled traces and traffic specs load") {
  const auto chat = load_traffic(source_path("workloads/traffic/chat.csv"));
  CHECK(chat.size() == 1000);
  CHECK(chat.front().prompt_tokens == 409);
  CHECK(chat.front().output_tokens == 391);
  CHECK(load_traffic(source_path("workloads/traffic/summarization.csv"), 10).size() == 10);
  const auto poisson = load_traffic(source_path("workloads/traffic/chat-poisson.json"));
  CHECK(poisson.size() == 2000);
  CHECK(load_traffic(source_path("workloads/traffic/bursty-gamma.json"), 50).size() == 50);
  const auto off = load_traffic(source_path("workloads/traffic/offline.json"));
  CHECK(off.back().arrival == Time::zero());
}

TEST_CASE("bad traces and specs name the file and the line or field") {
  const auto header = write_temp("ms_t1.csv", "time,prompt_tokens,output_tokens\n0,1,1\n");
  CHECK_THROWS_WITH_AS(read_trace_csv(header), doctest::Contains("no 'arrival_s' column"), Error);
  const auto back =
      write_temp("ms_t2.csv", "arrival_s,prompt_tokens,output_tokens\n1,5,5\n0.5,5,5\n");
  CHECK_THROWS_WITH_AS(read_trace_csv(back), doctest::Contains("line 3"), Error);
  const auto zero = write_temp("ms_t3.csv", "arrival_s,prompt_tokens,output_tokens\n0,0,5\n");
  CHECK_THROWS_WITH_AS(read_trace_csv(zero), doctest::Contains("prompt_tokens"), Error);
  const auto twice = write_temp(
      "ms_t4b.csv", "# a comment\narrival_s,prompt_tokens,output_tokens,prompt_tokens\n0,5,5,6\n");
  CHECK_THROWS_WITH_AS(read_trace_csv(twice),
                       (twice + ":line 2: the header names column 'prompt_tokens' twice").c_str(),
                       Error);
  const auto few = write_temp("ms_t4.csv", "arrival_s,prompt_tokens,output_tokens\n0,5\n");
  CHECK_THROWS_WITH_AS(read_trace_csv(few), doctest::Contains("too few columns"), Error);
  const auto empty = write_temp("ms_t5.csv", "arrival_s,prompt_tokens,output_tokens\n");
  CHECK_THROWS_WITH_AS(read_trace_csv(empty), doctest::Contains("no requests"), Error);
  const auto typo =
      write_temp("ms_t6.json", R"({"arrival": "poisson", "rate_per_s": 1, "prompt": "fixed:5",
                       "output": "fixed:5", "requets": 5})");
  CHECK_THROWS_WITH_AS(load_traffic(typo), doctest::Contains("requets"), Error);
  const auto norate =
      write_temp("ms_t7.json", R"({"arrival": "gamma", "prompt": "fixed:5", "output": "fixed:5"})");
  CHECK_THROWS_WITH_AS(load_traffic(norate), doctest::Contains("rate_per_s"), Error);
  const auto badlen = write_temp(
      "ms_t8.json", R"({"arrival": "offline", "prompt": "fixed:x", "output": "fixed:5"})");
  CHECK_THROWS_WITH_AS(load_traffic(badlen), doctest::Contains("/prompt"), Error);
  // A spec's shared prefixes: read, and a bad one names the file and the field.
  const auto shared = write_temp("ms_t9.json", R"({"arrival": "offline", "prompt": "fixed:600",
      "output": "fixed:5", "requests": 4, "prefix_share": "2:512"})");
  for (const auto& r : load_traffic(shared)) {
    CHECK(r.prefix_group >= 0);
    CHECK(r.prefix_group < 2);
    CHECK(r.prefix_tokens == 512);
  }
  const auto badshare = write_temp("ms_t10.json", R"({"arrival": "offline", "prompt": "fixed:5",
      "output": "fixed:5", "prefix_share": "0:512"})");
  CHECK_THROWS_WITH_AS(load_traffic(badshare), doctest::Contains("ms_t10.json:/prefix_share: "),
                       Error);
}

TEST_CASE("a CSV byte-order mark and a 64-bit seed are accepted as the JSON reader accepts them") {
  const auto bom = write_temp("ms_bom.csv",
                              "\xEF\xBB\xBF"
                              "arrival_s,prompt_tokens,output_tokens\n0,5,7\n");
  const auto r = read_trace_csv(bom);
  REQUIRE(r.size() == 1);
  CHECK(r[0].prompt_tokens == 5);
  CHECK(r[0].output_tokens == 7);
  const auto top = write_temp("ms_seed.json", R"({"arrival": "poisson", "rate_per_s": 1,
      "prompt": "fixed:5", "output": "fixed:5", "requests": 3, "seed": 18446744073709551615})");
  CHECK(load_traffic(top).size() == 3);
  const auto neg = write_temp("ms_seed2.json", R"({"arrival": "poisson", "rate_per_s": 1,
      "prompt": "fixed:5", "output": "fixed:5", "requests": 3, "seed": -1})");
  CHECK_THROWS_WITH_AS(load_traffic(neg),
                       (neg + ":/seed: must be an integer from 0 to 2^64 - 1").c_str(), Error);
}

}  // namespace meshsim::test
