#include "core/memory_budget.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace meshsim {

double memory_budget_bytes() {
  double available = kMaxPlannedBytes / 0.75;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0)
    available = std::min(available, static_cast<double>(pages) * static_cast<double>(page));
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit lim{};
    if (::getrlimit(resource, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
      available = std::min(available, static_cast<double>(lim.rlim_cur));
  }
  return std::min(kMaxPlannedBytes, 0.75 * available);
}

}  // namespace meshsim
