#pragma once
// Serving traffic: when requests arrive and how long their prompts and outputs are.
//
// Arrivals are offline (every request at time zero, MLPerf Inference's Offline scenario and
// throughput benchmarks), Poisson (exponential gaps, MLPerf's Server scenario) or gamma with a
// coefficient of variation (cv > 1 is burstier than Poisson, cv = 1 is Poisson). Lengths are
// fixed, uniform, lognormal or replayed from a CSV trace. Every draw comes from meshsim's seeded
// SplitMix64 generator with the samplers written out here (not <random>'s distributions, whose
// algorithms differ between standard libraries), so a seed gives the same requests everywhere.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "core/rng.hpp"
#include "core/units.hpp"

namespace meshsim {

struct Request {
  std::int64_t id = 0;
  Time arrival;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;  // tokens generated, the first one included
  // Requests of one prefix group begin with the same `prefix_tokens` tokens (a system prompt,
  // a shared document, earlier turns of a conversation); -1: no shared prefix.
  std::int64_t prefix_group = -1;
  std::int64_t prefix_tokens = 0;
};

enum class LengthKind { fixed, uniform, lognormal };

// fixed:N | uniform:LO,HI (inclusive) | lognormal:MEAN,SIGMA (arithmetic mean in tokens, σ of
// the logarithm; rounded to the nearest token, at least 1, at most `max`).
struct LengthDist {
  LengthKind kind = LengthKind::fixed;
  double a = 1, b = 0;
  std::int64_t max = std::int64_t{1} << 24;
  std::int64_t sample(Rng& rng) const;
  double mean() const;  // of the untruncated distribution
  std::string describe() const;
};
// Errors name `where`/`flag` and the accepted forms.
LengthDist parse_length_dist(const std::string& text, const std::string& where,
                             const std::string& flag);

enum class ArrivalKind { offline, poisson, gamma };

struct ArrivalSpec {
  ArrivalKind kind = ArrivalKind::poisson;
  double rate_per_s = 1;  // mean requests per second (unused offline)
  double cv = 1;          // gamma: coefficient of variation of the gaps
  std::string describe() const;
};
// "inf" → offline; a positive number → Poisson at that rate (gamma when cv ≠ 1).
ArrivalSpec arrival_from_rate(const std::string& rate, double cv, const std::string& flag);

// Shared prefixes (`--prefix-share GROUPS:TOKENS`, a spec's "prefix_share"): each request joins
// one of `groups` prefix groups, uniformly at random, and its first min(tokens, prompt) prompt
// tokens are its group's (prompt lengths do not change). groups 0: none.
struct PrefixShare {
  std::int64_t groups = 0, tokens = 0;
  std::string describe() const;
};
PrefixShare parse_prefix_share(const std::string& text, const std::string& where,
                               const std::string& flag);
// Assigns groups from its own stream of `seed`, so the lengths and arrivals stay those without it.
void apply_prefix_share(std::vector<Request>& requests, const PrefixShare& share,
                        std::uint64_t seed);

struct TrafficSpec {
  ArrivalSpec arrival;
  LengthDist prompt, output;
  PrefixShare prefix;
  std::int64_t requests = 1000;
  std::uint64_t seed = 1;
};

// Requests in arrival order, ids 0..n-1.
std::vector<Request> generate_requests(const TrafficSpec& spec);

// A CSV trace: a header naming the columns `arrival_s`, `prompt_tokens` and `output_tokens`
// (any order, other columns ignored), one request per line, arrivals non-decreasing; optional
// `prefix_group` and `prefix_tokens` columns (both or neither; an empty group cell or -1: none)
// say which requests share a prefix.
std::vector<Request> read_trace_csv(const std::string& path);
std::vector<Request> read_trace_csv(std::istream& in, const std::string& name);
// The JSON spec form of a traffic file (see load_traffic).
TrafficSpec read_traffic_spec(const JsonRef& root);
// A traffic file: a CSV trace (by extension .csv) or a JSON spec
//   {"arrival": "poisson"|"gamma"|"offline", "rate_per_s", "cv", "prompt": "lognormal:...",
//    "output": "...", "requests", "seed", "prefix_share": "GROUPS:TOKENS", "source"}
// Requests are generated from a spec; `requests_override` > 0 replaces its count.
std::vector<Request> load_traffic(const std::string& path, std::int64_t requests_override = 0);

// Samplers (exposed for tests): exponential with mean 1, standard normal (Box–Muller), gamma
// with shape k and scale 1 (Marsaglia & Tsang 2000; shape < 1 by Stuart's boost).
double sample_exponential(Rng& rng);
double sample_normal(Rng& rng);
double sample_gamma(Rng& rng, double shape);

}  // namespace meshsim
