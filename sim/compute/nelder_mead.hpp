#pragma once
// Derivative-free minimisation (Nelder & Mead 1965, with the standard coefficients 1, 2, ½, ½)
// for the handful of kernel parameters a calibration fits: the objectives are sums of absolute
// log errors with max() kinks, which gradient methods handle badly. Deterministic: the same
// start gives the same answer.
#include <functional>
#include <vector>

namespace meshsim {

struct Minimum {
  std::vector<double> x;
  double value = 0;
  int evaluations = 0;
};

// Minimises f from `start` with initial steps `step` (one per coordinate), restarting from the
// best point `restarts` times; stops a round when the simplex's values agree within `tolerance`
// or after `max_evaluations` evaluations.
Minimum nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                    std::vector<double> start, std::vector<double> step, int restarts = 2,
                    double tolerance = 1e-7, int max_evaluations = 4000);

}  // namespace meshsim
