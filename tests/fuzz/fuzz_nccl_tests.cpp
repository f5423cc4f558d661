// Fuzzes the nccl-tests log reader (`calibrate fit --nccl-tests`): every row it accepts has a
// byte count, time and bandwidths in range before anything is fitted to it.
#include <cmath>

#include "fuzz_common.hpp"
#include "network/nccl_tests_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return meshsim::fuzz::run(data, size, [](const std::string& text) {
    const auto log = meshsim::parse_nccl_tests_log(text, "fuzz.log", "all_reduce");
    if (log.ranks < 1 || log.nodes < 1) __builtin_trap();
    for (const auto& r : log.rows) {
      if (!(r.bytes >= 0) || r.bytes > 0x1p44) __builtin_trap();
      if (!(r.time_us > 0) || r.time_us > 1e12) __builtin_trap();
      if (!(r.algbw_GBps >= 0) || !(r.busbw_GBps >= 0) || r.busbw_GBps > 1e6) __builtin_trap();
    }
  });
}
