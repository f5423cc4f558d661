#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "core/error.hpp"
#include "embedding.hpp"

namespace meshsim::cli {

namespace {

// A line this often when stderr is not a terminal: 5 s, or MESHSIM_PROGRESS_INTERVAL_S.
double log_interval_s() {
  const char* v = std::getenv("MESHSIM_PROGRESS_INTERVAL_S");
  if (v == nullptr || *v == '\0') return 5;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || !(s >= 0))
    throw Error("", "MESHSIM_PROGRESS_INTERVAL_S",
                std::string("'") + v + "': expected seconds between progress lines (>= 0)");
  return s;
}

}  // namespace

Progress::Progress(std::string what, bool quiet, Total total)
    : what_(std::move(what)),
      os_(&cli_err()),
      quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      total_(total),
      interval_s_(log_interval_s()),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(std::size_t done, std::size_t total) {
  if (quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = s > 0 ? static_cast<double>(done) / s : 0;
  const double eta = rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate : 0.0;
  if (!tty_) {
    if (s - last_line_s_ < interval_s_ || done >= total) return;
    last_line_s_ = s;
    if (total_ == Total::at_most)
      *os_ << fmt::format(
          "# {} {} in {:.0f} s ({:.1f}/s); at most {} left (a bound: fewer are "
          "usually needed)\n",
          done, what_, s, rate, total - done);
    else
      *os_ << fmt::format("# {}/{} {} in {:.0f} s ({:.1f}/s), ETA {:.0f} s\n", done, total, what_,
                          s, rate, eta);
    return;
  }
  const int width = 30;
  const int filled =
      static_cast<int>(width * std::min(done, total) / std::max<std::size_t>(total, 1));
  const auto tail = total_ == Total::at_most ? std::string() : fmt::format(" ETA {:.0f} s", eta);
  *os_ << fmt::format("\r[{}{}] {}/{}{} {} {:.1f}/s{} ", std::string(filled, '='),
                      std::string(width - filled, ' '), done, total_ == Total::at_most ? "≤" : "",
                      total, what_, rate, tail)
       << (done >= total ? "\n" : "") << std::flush;
}

}  // namespace meshsim::cli
