#include "serving/traffic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace meshsim {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A whole-string number; nullopt on trailing text, empty text, NaN or infinity.
std::optional<double> to_number(std::string_view s) {
  s = trim_view(s);
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const auto pos = s.find(sep, start);
    out.push_back(
        s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;

}  // namespace

double sample_exponential(Rng& rng) {
  // 1 − U lies in (0, 1], so the logarithm is finite.
  return -std::log(1.0 - rng.uniform01());
}

double sample_normal(Rng& rng) {
  const double u1 = 1.0 - rng.uniform01(), u2 = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

double sample_gamma(Rng& rng, double shape) {
  if (shape < 1.0) {
    // Gamma(k) = Gamma(k + 1) · U^(1/k) (Stuart 1962), so small shapes reuse the k ≥ 1 sampler.
    const double u = 1.0 - rng.uniform01();
    return sample_gamma(rng, shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = sample_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform01();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

std::int64_t LengthDist::sample(Rng& rng) const {
  double v = a;
  switch (kind) {
    case LengthKind::fixed:
      break;
    case LengthKind::uniform:
      v = a + static_cast<double>(rng.below(static_cast<std::uint64_t>(b - a) + 1));
      break;
    case LengthKind::lognormal: {
      // mean = exp(μ + σ²/2)
      const double mu = std::log(a) - 0.5 * b * b;
      v = std::exp(mu + b * sample_normal(rng));
      break;
    }
  }
  return std::clamp<std::int64_t>(std::llround(v), 1, max);
}

double LengthDist::mean() const {
  switch (kind) {
    case LengthKind::fixed:
    case LengthKind::lognormal:
      return a;
    case LengthKind::uniform:
      return 0.5 * (a + b);
  }
  return a;
}

std::string LengthDist::describe() const {
  switch (kind) {
    case LengthKind::fixed:
      return fmt::format("fixed:{}", a);
    case LengthKind::uniform:
      return fmt::format("uniform:{},{}", a, b);
    case LengthKind::lognormal:
      return fmt::format("lognormal:{},{}", a, b);
  }
  return "?";
}

LengthDist parse_length_dist(const std::string& text, const std::string& where,
                             const std::string& flag) {
  const auto fail = [&]() -> LengthDist {
    throw Error(where, flag,
                "'" + text +
                    "': expected fixed:N, uniform:LO,HI or lognormal:MEAN,SIGMA with token "
                    "counts from 1 to " +
                    std::to_string(kMaxTokens));
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) return fail();
  const std::string kind = text.substr(0, colon);
  const auto parts = split(std::string_view(text).substr(colon + 1), ',');
  std::vector<double> v;
  for (auto p : parts) {
    const auto n = to_number(p);
    if (!n) return fail();
    v.push_back(*n);
  }
  const auto count = [](double x) {
    return x >= 1 && x <= static_cast<double>(kMaxTokens) && x == std::floor(x);
  };
  LengthDist d;
  if (kind == "fixed" && v.size() == 1 && count(v[0])) {
    d.kind = LengthKind::fixed;
    d.a = v[0];
  } else if (kind == "uniform" && v.size() == 2 && count(v[0]) && count(v[1]) && v[0] <= v[1]) {
    d.kind = LengthKind::uniform;
    d.a = v[0];
    d.b = v[1];
  } else if (kind == "lognormal" && v.size() == 2 && v[0] >= 1 &&
             v[0] <= static_cast<double>(kMaxTokens) && v[1] >= 0 && v[1] <= 4) {
    d.kind = LengthKind::lognormal;
    d.a = v[0];
    d.b = v[1];
  } else {
    return fail();
  }
  return d;
}

std::string ArrivalSpec::describe() const {
  switch (kind) {
    case ArrivalKind::offline:
      return "offline (all at t = 0)";
    case ArrivalKind::poisson:
      return fmt::format("Poisson, {} req/s", rate_per_s);
    case ArrivalKind::gamma:
      return fmt::format("gamma, {} req/s, cv {}", rate_per_s, cv);
  }
  return "?";
}

ArrivalSpec arrival_from_rate(const std::string& rate, double cv, const std::string& flag) {
  ArrivalSpec a;
  if (!(cv > 0) || cv > 100) throw Error("", "--burstiness", "must be in (0, 100]");
  if (rate == "inf") {
    a.kind = ArrivalKind::offline;
    return a;
  }
  const auto v = to_number(rate);
  if (!v || !(*v > 0) || *v > 1e9)
    throw Error("", flag, "'" + rate + "': expected a positive rate in requests/s, or inf");
  a.rate_per_s = *v;
  a.cv = cv;
  a.kind = cv == 1.0 ? ArrivalKind::poisson : ArrivalKind::gamma;
  return a;
}

std::string PrefixShare::describe() const {
  return groups > 0 ? fmt::format("{} prefix groups of {} tokens", groups, tokens) : "no prefixes";
}

PrefixShare parse_prefix_share(const std::string& text, const std::string& where,
                               const std::string& flag) {
  const auto colon = text.find(':');
  const auto fail = [&]() -> PrefixShare {
    throw Error(where, flag,
                "'" + text + "': expected GROUPS:TOKENS, from 1 to 1048576 prefix groups of 1 to " +
                    std::to_string(kMaxTokens) + " shared tokens");
  };
  if (colon == std::string::npos) return fail();
  const auto g = to_number(std::string_view(text).substr(0, colon));
  const auto t = to_number(std::string_view(text).substr(colon + 1));
  if (!g || !t || *g != std::floor(*g) || *t != std::floor(*t) || *g < 1 || *g > (1 << 20) ||
      *t < 1 || *t > static_cast<double>(kMaxTokens))
    return fail();
  return PrefixShare{.groups = static_cast<std::int64_t>(*g),
                     .tokens = static_cast<std::int64_t>(*t)};
}

void apply_prefix_share(std::vector<Request>& requests, const PrefixShare& share,
                        std::uint64_t seed) {
  if (share.groups <= 0) return;
  Rng groups(hash_combine(seed, 4));
  for (auto& r : requests) {
    r.prefix_group = std::min<std::int64_t>(
        static_cast<std::int64_t>(groups.uniform01() * static_cast<double>(share.groups)),
        share.groups - 1);
    r.prefix_tokens = std::min(share.tokens, r.prompt_tokens);
  }
}

std::vector<Request> generate_requests(const TrafficSpec& spec) {
  // Separate streams for gaps and lengths, so changing the rate keeps the same lengths.
  Rng gaps(hash_combine(spec.seed, 1)), prompts(hash_combine(spec.seed, 2)),
      outputs(hash_combine(spec.seed, 3));
  std::vector<Request> out;
  out.reserve(static_cast<std::size_t>(spec.requests));
  double t = 0;
  const double k = 1.0 / (spec.arrival.cv * spec.arrival.cv);
  for (std::int64_t i = 0; i < spec.requests; ++i) {
    if (i > 0) {
      switch (spec.arrival.kind) {
        case ArrivalKind::offline:
          break;
        case ArrivalKind::poisson:
          t += sample_exponential(gaps) / spec.arrival.rate_per_s;
          break;
        case ArrivalKind::gamma:
          // Gaps of mean 1/rate and variance (cv/rate)²: shape 1/cv², scale cv²/rate.
          t += sample_gamma(gaps, k) / (k * spec.arrival.rate_per_s);
          break;
      }
    }
    Request r;
    r.id = i;
    r.arrival = Time::from_seconds_ceil(t);
    r.prompt_tokens = spec.prompt.sample(prompts);
    r.output_tokens = spec.output.sample(outputs);
    out.push_back(r);
  }
  apply_prefix_share(out, spec.prefix, spec.seed);
  return out;
}

std::vector<Request> read_trace_csv(const std::string& path) {
  std::istringstream in(read_input_file(path));
  return read_trace_csv(in, path);
}

std::vector<Request> read_trace_csv(std::istream& in, const std::string& path) {
  std::string line;
  std::int64_t line_no = 0;
  std::map<std::string, std::size_t> col;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A UTF-8 byte-order mark (spreadsheets write one) starts the file, not a column name; the
    // JSON reader skips it too.
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    if (line.empty() || line.front() == '#') continue;
    const auto names = split(line, ',');
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::string n(names[i]);
      n.erase(0, n.find_first_not_of(" \t"));
      n.erase(n.find_last_not_of(" \t") + 1);
      // A column given twice is an error, not "the first one wins".
      if (!col.emplace(n, i).second)
        throw Error(path, "line " + std::to_string(line_no),
                    "the header names column '" + n + "' twice");
    }
    break;
  }
  for (const char* need : {"arrival_s", "prompt_tokens", "output_tokens"})
    if (!col.contains(need))
      throw Error(path, "line " + std::to_string(line_no),
                  std::string("the header has no '") + need +
                      "' column (needed: arrival_s, prompt_tokens, output_tokens)");
  const bool prefixes = col.contains("prefix_group") || col.contains("prefix_tokens");
  if (prefixes && !(col.contains("prefix_group") && col.contains("prefix_tokens")))
    throw Error(path, "line " + std::to_string(line_no),
                "the header names one of prefix_group and prefix_tokens: give both or neither");
  std::size_t width = std::max({col["arrival_s"], col["prompt_tokens"], col["output_tokens"]});
  if (prefixes) width = std::max({width, col["prefix_group"], col["prefix_tokens"]});
  std::vector<Request> out;
  double last = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const auto cells = split(line, ',');
    const auto where = "line " + std::to_string(line_no);
    if (cells.size() <= width) throw Error(path, where, "too few columns");
    const auto arrival = to_number(cells[col["arrival_s"]]);
    if (!arrival || *arrival < 0 || *arrival > 1e9)
      throw Error(path, where, "arrival_s must be a number of seconds from 0 to 1e9");
    if (*arrival < last) throw Error(path, where, "arrivals must not go back in time");
    last = *arrival;
    Request r;
    r.id = static_cast<std::int64_t>(out.size());
    r.arrival = Time::from_seconds_ceil(*arrival);
    for (auto [name, field] : {std::pair{"prompt_tokens", &r.prompt_tokens},
                               std::pair{"output_tokens", &r.output_tokens}}) {
      const auto v = to_number(cells[col[name]]);
      if (!v || *v < 1 || *v > static_cast<double>(kMaxTokens) || *v != std::floor(*v))
        throw Error(
            path, where,
            std::string(name) + " must be a whole number from 1 to " + std::to_string(kMaxTokens));
      *field = static_cast<std::int64_t>(*v);
    }
    if (prefixes) {
      const auto group_cell = trim_view(cells[col["prefix_group"]]);
      if (!group_cell.empty() && group_cell != "-1") {
        const auto g = to_number(group_cell);
        if (!g || *g < 0 || *g >= 2147483648.0 || *g != std::floor(*g))
          throw Error(path, where,
                      "prefix_group must be a whole number from 0 to 2^31 - 1, or empty or -1 "
                      "for none");
        const auto t = to_number(cells[col["prefix_tokens"]]);
        if (!t || *t < 0 || *t > static_cast<double>(r.prompt_tokens) || *t != std::floor(*t))
          throw Error(path, where,
                      "prefix_tokens must be a whole number from 0 to the request's "
                      "prompt_tokens");
        r.prefix_group = static_cast<std::int64_t>(*g);
        r.prefix_tokens = static_cast<std::int64_t>(*t);
      }
    }
    out.push_back(r);
    if (out.size() > (std::size_t{1} << 26)) throw Error(path, where, "trace too long");
  }
  if (out.empty()) throw Error(path, "", "the trace has no requests");
  return out;
}

TrafficSpec read_traffic_spec(const JsonRef& root) {
  ObjectReader r(root);
  const std::string& path = root.file();
  TrafficSpec spec;
  const auto kind = r.required("arrival");
  const auto k = kind.string();
  if (k == "offline")
    spec.arrival.kind = ArrivalKind::offline;
  else if (k == "poisson")
    spec.arrival.kind = ArrivalKind::poisson;
  else if (k == "gamma")
    spec.arrival.kind = ArrivalKind::gamma;
  else
    kind.fail("unknown arrival '" + k + "' (known: offline, poisson, gamma)");
  if (auto v = r.optional("rate_per_s")) {
    spec.arrival.rate_per_s = v->positive_number();
    if (spec.arrival.rate_per_s > 1e9) v->fail("is implausibly large");
  } else if (spec.arrival.kind != ArrivalKind::offline) {
    r.self().fail("needs rate_per_s for " + k + " arrivals");
  }
  if (auto v = r.optional("cv")) {
    spec.arrival.cv = v->positive_number();
    if (spec.arrival.cv > 100) v->fail("must be at most 100");
    if (spec.arrival.kind != ArrivalKind::gamma) v->fail("applies to gamma arrivals only");
  }
  for (auto [key, dist] : {std::pair{"prompt", &spec.prompt}, std::pair{"output", &spec.output}}) {
    const auto v = r.required(key);
    *dist = parse_length_dist(v.string(), path, v.path());
  }
  if (auto v = r.optional("requests")) {
    spec.requests = v->positive_integer();
    if (spec.requests > (std::int64_t{1} << 26)) v->fail("is implausibly large");
  }
  if (auto v = r.optional("seed")) {
    // Any 64-bit seed: 2^64 − 1 is a seed, not a negative number.
    if (v->raw().is_number_unsigned()) {
      spec.seed = v->raw().get<std::uint64_t>();
    } else {
      const auto s = v->integer();
      if (s < 0) v->fail("must be an integer from 0 to 2^64 - 1");
      spec.seed = static_cast<std::uint64_t>(s);
    }
  }
  if (auto v = r.optional("prefix_share"))
    spec.prefix = parse_prefix_share(v->string(), path, v->path());
  if (auto v = r.optional("source")) (void)v->string();
  r.finish();
  return spec;
}

std::vector<Request> load_traffic(const std::string& path, std::int64_t requests_override) {
  std::vector<Request> reqs;
  if (std::filesystem::path(path).extension() == ".csv") {
    reqs = read_trace_csv(path);
    if (requests_override > 0 && static_cast<std::size_t>(requests_override) < reqs.size())
      reqs.resize(static_cast<std::size_t>(requests_override));
    return reqs;
  }
  const Json doc = load_json_file(path);
  auto spec = read_traffic_spec(JsonRef::root(doc, path));
  if (requests_override > 0) spec.requests = requests_override;
  return generate_requests(spec);
}

}  // namespace meshsim
