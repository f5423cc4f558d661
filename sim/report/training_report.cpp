#include "report/training_report.hpp"

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "compute/dtype.hpp"
#include "parallel/parallel_config.hpp"
#include "report/metrics_json.hpp"
#include "stack/stack.hpp"

namespace meshsim {
namespace {

std::string pct(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

// Which layers and ops recompute: the modules of a selective policy; a full recompute's period
// (torchtitan's layer policy), block (Megatron's block method) and group (its uniform method).
void recompute_fields(Json& j, const ParallelConfig& c) {
  j["recompute_modules"] = c.recompute_modules;
  j["recompute_every"] = c.recompute_every;
  j["recompute_block"] = c.recompute_block;
  j["recompute_group"] = c.recompute_group;
}

// The label column of the text summary; a longer label keeps one space before its value.
std::string label(const std::string& name) {
  return fmt::format("{:<21} ", name);
}

}  // namespace

bool fits_memory(const TrainingResult& r, const TrainingRun& run) {
  return r.memory.total() <= run.gpu_bytes;
}

std::string training_text(const TrainingResult& r, const TrainingRun& run) {
  const auto& setup = *run.setup;
  const auto& job = setup.job;
  const auto& cfg = setup.config;
  std::string out;
  out +=
      fmt::format("# meshsim train: {} on {} ({} × {})\n", run.model, run.cluster, r.gpus, run.gpu);
  out += "# kernel model: " + run.kernel_model + "\n";
  const auto graphs = setup.strategy.stack.cuda_graphs;
  out += fmt::format(
      "# stack: {} (TP overlap {}, interference {}{}{})\n", r.stack, r.tp_overlap ? "on" : "off",
      setup.strategy.stack.interference.on ? "modelled" : "off",
      graphs == CudaGraphs::none ? std::string()
                                 : ", CUDA graphs per " + std::string(name_of(graphs)),
      r.cp_comm.empty() ? std::string() : ", CP K/V " + r.cp_comm);
  out += fmt::format(
      "# {}, ZeRO-{}, sp {}, schedule {}, recompute {}; seq {}, global batch {}, micro-batch {} "
      "({} micro-batches per step), {}\n",
      to_string(cfg.mesh), cfg.zero, cfg.sp ? "on" : "off", to_string(cfg.schedule),
      recompute_label(cfg), job.seq, job.global_batch, job.micro_batch, r.microbatches,
      name_of(job.dtype));
  std::string layers;
  for (auto l : r.chunk_layers) layers += (layers.empty() ? "" : " ") + std::to_string(l);
  out += fmt::format("# layers per stage: {}; simulated {} ranks ({}), {} ops\n", layers,
                     r.simulated_ranks, setup.full ? "every rank" : "one per stage, folded", r.ops);
  const double step = r.step_time_s;
  out += fmt::format("{}{:.4f} s\n", label("step time"), step);
  out += fmt::format("{}{:.0f} (per GPU {:.1f})\n", label("tokens/s"), r.tokens_per_s,
                     r.tokens_per_s_per_gpu);
  out += fmt::format("{}{:.1f}  MFU {:.1f}% (model FLOPs)  HFU {:.1f}% (with recompute)\n",
                     label("model TFLOP/s/GPU"), r.model_tflops_per_gpu, 100 * r.mfu, 100 * r.hfu);
  out += fmt::format("{}{:.4f} s ({})\n", label("compute"), r.compute_s, pct(r.compute_s, step));
  if (r.interference_s > 0)
    out += fmt::format("{}{:.4f} s of it\n", label("  slowed by comm"), r.interference_s);
  if (r.comm_interference_s > 0)
    out += fmt::format("{}{:.4f} s lost by collectives to HBM sharing and SM waits\n",
                       label("  comm slowed"), r.comm_interference_s);
  out += fmt::format("{}{:.4f} s ({})\n", label("bubble / waiting"), r.bubble_s,
                     pct(r.bubble_s, step));
  if (r.host_wait_s > 0)
    out += fmt::format("{}{:.4f} s ({}): GPU idle until the host launched its next op\n",
                       label("waiting for host"), r.host_wait_s, pct(r.host_wait_s, step));
  for (const auto& [g, v] : r.exposed_comm_s)
    out += fmt::format("{}{:.4f} s ({}), {:.2f} GB sent per GPU\n", label("exposed comm " + g), v,
                       pct(v, step), r.comm_bytes_per_gpu.at(g) / 1e9);
  for (const auto& [k, v] : r.exposed_comm_by_op_s)
    out += fmt::format("{}{:.4f} s\n", label("  by op " + k), v);
  out += fmt::format("{}{:.2f} GB of {:.2f} (stage {}, {})\n", label("peak memory"),
                     r.memory.total() / 1e9, run.gpu_bytes / 1e9, r.memory.stage,
                     fits_memory(r, run) ? "fits" : "does not fit; simulated anyway (--allow-oom)");
  out += fmt::format("{}{:.1f} s every {:.0f} s; goodput {:.1f}% of wall time\n",
                     label("checkpoint"), r.reliability.checkpoint_s,
                     r.reliability.checkpoint_interval_s, 100 * r.reliability.goodput_fraction);
  out += "per simulated rank (critical path): compute / exposed comm / bubble\n";
  for (const auto& b : r.ranks) {
    double exposed = 0;
    std::string worst;
    double worst_v = 0;
    for (const auto& [g, v] : b.exposed_s) {
      exposed += v;
      if (v > worst_v) {
        worst_v = v;
        worst = g;
      }
    }
    out += fmt::format("  rank {:>5} stage {:>3}: {:.4f} / {:.4f}{} / {:.4f} s\n", b.rank, b.stage,
                       b.compute_s, exposed, worst.empty() ? "" : " (mostly " + worst + ")",
                       b.bubble_s);
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

Json training_run_json(const TrainingResult& r, const TrainingRun& run) {
  const auto& setup = *run.setup;
  Json j = training_json(r);
  j["memory"]["gpu_bytes"] = run.gpu_bytes;
  j["memory"]["fits"] = fits_memory(r, run);
  j["mesh"] = mesh_json(setup.config.mesh);
  j["zero"] = setup.config.zero;
  j["schedule"] = to_string(setup.config.schedule);
  j["recompute"] = name_of(setup.config.recompute);
  recompute_fields(j, setup.config);
  j["mbs"] = setup.job.micro_batch;
  j["gbs"] = setup.job.global_batch;
  j["microbatches"] = r.microbatches;
  j["stage_layers"] = r.chunk_layers;
  j["checkpoint_s"] = r.reliability.checkpoint_s;
  j["checkpoint_interval_s"] = r.reliability.checkpoint_interval_s;
  j["goodput_fraction"] = r.reliability.goodput_fraction;
  j["simulated_ranks"] = r.simulated_ranks;
  j["notes"] = r.notes;
  Json stages = Json::array();
  for (const auto& b : r.ranks)
    stages.push_back({{"rank", b.rank},
                      {"stage", b.stage},
                      {"compute_s", b.compute_s},
                      {"bubble_s", b.bubble_s},
                      {"host_wait_s", b.host_wait_s},
                      {"exposed_comm_s", map_json(b.exposed_s)}});
  j["ranks"] = std::move(stages);
  return j;
}

std::string does_not_fit_text(const TrainingResult& r, const TrainingRun& run) {
  const auto& cfg = run.setup->config;
  std::string out = fmt::format("# {}, ZeRO-{}, recompute {}\n", to_string(cfg.mesh), cfg.zero,
                                recompute_label(cfg));
  // A training step holds no KV cache: every category but the last.
  for (const auto& c : memory_categories(r.memory))
    if (std::string_view(c.name) != "kv_cache")
      out += fmt::format("{}{:.2f} GB\n", label(c.name), c.bytes / 1e9);
  out += fmt::format("{}{:.2f} GB of {:.2f} (stage {})\n", label("peak memory"),
                     r.memory.total() / 1e9, run.gpu_bytes / 1e9, r.memory.stage);
  // The split's notes: a split of the stack's end switches that would fit, among them.
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

Json does_not_fit_json(const TrainingResult& r, const TrainingRun& run) {
  const auto& cfg = run.setup->config;
  Json j;
  j["fits"] = false;
  j["mesh"] = mesh_json(cfg.mesh);
  j["zero"] = cfg.zero;
  j["recompute"] = name_of(cfg.recompute);
  recompute_fields(j, cfg);
  j["memory"] = memory_json(r.memory);
  j["memory"]["total"] = r.memory.total();
  j["memory"]["stage"] = r.memory.stage;
  j["memory"]["gpu_bytes"] = run.gpu_bytes;
  j["memory"]["over_bytes"] = r.memory.total() - run.gpu_bytes;
  j["notes"] = r.notes;
  return j;
}

std::string does_not_fit_verdict(const TrainingResult& r, const TrainingRun& run) {
  return fmt::format(
      "verdict: does not fit: stage {} needs {:.2f} GB per GPU, {:.2f} GB over the GPU's {:.2f}; "
      "no step time is reported (--allow-oom simulates it anyway; more pp/tp, a higher --zero "
      "or --recompute full use less)\n",
      r.memory.stage, r.memory.total() / 1e9, (r.memory.total() - run.gpu_bytes) / 1e9,
      run.gpu_bytes / 1e9);
}

}  // namespace meshsim
