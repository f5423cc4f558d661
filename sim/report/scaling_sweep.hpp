#pragma once
// `meshsim search --sweep-nodes`: the best layout at each cluster size and how well it scales
// against the first size where a layout fits. Strong scaling keeps the global batch; weak scaling
// grows it with the nodes, so efficiency compares tokens/s per GPU.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json_reader.hpp"

namespace meshsim {

struct SweepBest {
  double tokens_per_s = 0, mfu = 0;
  double efficiency = 0;  // a fraction, against the reference point
  std::string layout;     // the winner's label
};

struct SweepPoint {
  std::int32_t nodes = 0;
  double gpus = 0;
  std::int64_t global_batch = 0;
  std::optional<SweepBest> best;  // none: no layout fits
};

struct ScalingSweep {
  bool weak = false;
  std::string model;
  std::int32_t first_nodes = 0;  // the first size swept (weak scaling's batch reference)
  std::vector<SweepPoint> points;
};

// Strong: (tokens/s ÷ reference tokens/s) ÷ (GPUs ÷ reference GPUs). Weak: tokens/s per GPU ÷
// the reference's.
double scaling_efficiency(bool weak, double tokens_per_s, double gpus, double ref_tokens_per_s,
                          double ref_gpus);
// The point efficiency is measured against: the first where a layout fits (none: nothing fits).
const SweepPoint* efficiency_reference(const ScalingSweep& sweep);

// The text is printed a row at a time as points are simulated: the header, then each row, then
// the footer (which says when the efficiency reference is not the first size).
std::string sweep_header_text(const ScalingSweep& sweep);
std::string sweep_row_text(const SweepPoint& point);
std::string sweep_footer_text(const ScalingSweep& sweep);
// {"scaling", "reference_nodes", "efficiency_reference_nodes", "points": [{"nodes", "gpus",
//  "gbs", "tokens_per_s", "mfu", "efficiency", "best"}]} ("best": null where nothing fits).
Json sweep_json(const ScalingSweep& sweep);

}  // namespace meshsim
