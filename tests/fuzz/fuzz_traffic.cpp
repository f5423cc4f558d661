// Fuzzes the serving traffic readers: CSV traces and JSON traffic specs (first byte picks), then
// serves what they accept (up to 200 requests) on one replica of a small model.
#include <sstream>

#include "fuzz_common.hpp"
#include "fuzz_sim_fixture.hpp"
#include "serving/traffic.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    if (!text.empty() && text.front() == '{') {
      auto spec = meshsim::read_traffic_spec(
          meshsim::JsonRef::root(meshsim::fuzz::parse(text), "fuzz.json"));
      spec.requests = std::min<std::int64_t>(spec.requests, 200);
      const auto reqs = meshsim::generate_requests(spec);
      for (const auto& r : reqs)
        if (r.prompt_tokens < 1 || r.output_tokens < 1) __builtin_trap();
      meshsim::fuzz::serve(reqs);
    } else {
      std::istringstream in(text);
      const auto reqs = meshsim::read_trace_csv(in, "fuzz.csv");
      for (std::size_t i = 1; i < reqs.size(); ++i)
        if (reqs[i].arrival < reqs[i - 1].arrival) __builtin_trap();
      if (reqs.size() <= 200) meshsim::fuzz::serve(reqs);
    }
  });
}
