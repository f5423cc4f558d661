#include "report/scaling_sweep.hpp"

#include <fmt/format.h>

namespace meshsim {

double scaling_efficiency(bool weak, double tokens_per_s, double gpus, double ref_tokens_per_s,
                          double ref_gpus) {
  return weak ? (tokens_per_s / gpus) / (ref_tokens_per_s / ref_gpus)
              : (tokens_per_s / ref_tokens_per_s) / (gpus / ref_gpus);
}

const SweepPoint* efficiency_reference(const ScalingSweep& sweep) {
  for (const auto& p : sweep.points)
    if (p.best) return &p;
  return nullptr;
}

std::string sweep_header_text(const ScalingSweep& sweep) {
  std::string out = fmt::format(
      "# meshsim search sweep ({} scaling): {}; reference point {} nodes; efficiency = {}\n",
      sweep.weak ? "weak" : "strong", sweep.model, sweep.first_nodes,
      sweep.weak ? "tokens/s per GPU ÷ the reference's (global batch grows with the nodes)"
                 : "(tokens/s ÷ reference tokens/s) ÷ (GPUs ÷ reference GPUs) at a fixed global "
                   "batch");
  out += fmt::format("{:>6} {:>7} {:>8} {:>12} {:>10} {:>11}  {}\n", "nodes", "GPUs", "gbs",
                     "tokens/s", "MFU", "efficiency", "best mesh");
  return out;
}

std::string sweep_row_text(const SweepPoint& p) {
  if (!p.best)
    return fmt::format("{:>6} {:>7} {:>8}  no candidate fits\n", p.nodes, p.gpus, p.global_batch);
  return fmt::format("{:>6} {:>7} {:>8} {:>12.0f} {:>9.1f}% {:>10.1f}%  {}\n", p.nodes, p.gpus,
                     p.global_batch, p.best->tokens_per_s, 100 * p.best->mfu,
                     100 * p.best->efficiency, p.best->layout);
}

std::string sweep_footer_text(const ScalingSweep& sweep) {
  const auto* ref = efficiency_reference(sweep);
  if (!ref) return "# no layout fits at any size\n";
  if (ref->nodes == sweep.first_nodes) return "";
  return fmt::format("# efficiency is against {} nodes, the first size where a layout fits\n",
                     ref->nodes);
}

Json sweep_json(const ScalingSweep& sweep) {
  Json points = Json::array();
  for (const auto& p : sweep.points) {
    Json j{{"nodes", p.nodes}, {"gpus", p.gpus}, {"gbs", p.global_batch}};
    if (!p.best) {
      j["best"] = nullptr;
    } else {
      j["tokens_per_s"] = p.best->tokens_per_s;
      j["mfu"] = p.best->mfu;
      j["efficiency"] = p.best->efficiency;
      j["best"] = p.best->layout;
    }
    points.push_back(std::move(j));
  }
  const auto* ref = efficiency_reference(sweep);
  return Json{{"scaling", sweep.weak ? "weak" : "strong"},
              {"reference_nodes", sweep.first_nodes},
              {"efficiency_reference_nodes", ref ? Json(ref->nodes) : Json(nullptr)},
              {"points", points}};
}

}  // namespace meshsim
