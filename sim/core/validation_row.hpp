#pragma once
// One compared figure of a validation case: what a published source measured and what meshsim
// simulates for the same configuration. Every module that can be validated turns its case files
// into these rows; `meshsim validate` prints them.
#include <cmath>
#include <string>

namespace meshsim {

struct ValidationRow {
  std::string group;  // e.g. "mlperf-inference-v4.1"; MAPE is reported per group
  std::string name;
  std::string metric;
  std::string unit;
  double measured = 0, simulated = 0;
  std::string source, reading;
  std::string detail;     // the configuration in a few words, for tables
  double tolerance = 0;   // relative; 0 when the case has none of its own
  std::string known_gap;  // non-empty: what the model does not capture (held outside tolerance)
  // Signed relative error of the simulation, (simulated − measured) / measured.
  double error() const { return measured != 0 ? (simulated - measured) / measured : NAN; }
};

}  // namespace meshsim
