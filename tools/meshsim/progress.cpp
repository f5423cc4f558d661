#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

namespace meshsim::cli {

namespace {
constexpr double kLogIntervalS = 5;  // a line this often when stderr is not a terminal
}

Progress::Progress(std::string what, bool quiet)
    : what_(std::move(what)),
      quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(std::size_t done, std::size_t total) {
  if (quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = s > 0 ? static_cast<double>(done) / s : 0;
  const double eta = rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate : 0.0;
  if (!tty_) {
    if (s - last_line_s_ < kLogIntervalS || done >= total) return;
    last_line_s_ = s;
    std::cerr << fmt::format("# {}/{} {} in {:.0f} s ({:.1f}/s), ETA {:.0f} s\n", done, total,
                             what_, s, rate, eta);
    return;
  }
  const int width = 30;
  const int filled =
      static_cast<int>(width * std::min(done, total) / std::max<std::size_t>(total, 1));
  std::cerr << fmt::format("\r[{}{}] {}/{} {} {:.1f}/s ETA {:.0f} s ", std::string(filled, '='),
                           std::string(width - filled, ' '), done, total, what_, rate, eta)
            << (done >= total ? "\n" : "") << std::flush;
}

}  // namespace meshsim::cli
