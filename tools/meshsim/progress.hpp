#pragma once
// Progress of a long command on stderr: a bar redrawn in place on a terminal; otherwise (a log,
// CI, a pipe) one line every 5 s (MESHSIM_PROGRESS_INTERVAL_S) with done/total, rate and ETA, so
// a redirected run is never silent for long; nothing with --quiet. stdout is untouched (it stays
// byte-identical). Where the total is only an upper bound (a bounded search leaves most layouts
// out as it goes), no ETA is printed: it would be that bound's, hours where the search takes
// seconds (DeepSeek-V3 on 512 GPUs printed "ETA 168801 s" for a 100 s search).
#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>

namespace meshsim::cli {

class Progress {
 public:
  enum class Total { exact, at_most };
  // `what`: the counted things ("layouts", "requests"); `quiet`: print nothing; `total`: whether
  // update()'s total is the count that will be reached or only a bound on it.
  Progress(std::string what, bool quiet, Total total = Total::exact);
  // Call from one thread at a time (the search calls it under its own lock).
  void update(std::size_t done, std::size_t total);

 private:
  std::string what_;
  std::ostream* os_;  // the creating thread's stderr (embedding.hpp): workers print there too
  bool quiet_, tty_;
  Total total_;
  double interval_s_;
  std::chrono::steady_clock::time_point start_;
  double last_line_s_ = 0;
};

}  // namespace meshsim::cli
