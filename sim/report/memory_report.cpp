#include "report/memory_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/enum_names.hpp"
#include "report/metrics_json.hpp"

namespace meshsim {

namespace {

std::string gb(double bytes) {
  return fmt::format("{:.2f}", bytes / 1e9);
}

// The job's line(s) under the title: the layout and batch, or the replica and its KV cache.
std::string job_header(const MemoryRun& run, const MemoryBreakdown& b) {
  const ParallelConfig& cfg = *run.config;
  if (run.serving) {
    const ServingMemoryJob& job = *run.serving;
    std::string header = fmt::format(
        "serving, tp={} pp={}, {} weights, {} KV cache, {} sequences × {} tokens", job.tp, job.pp,
        name_of(job.weight_dtype), name_of(job.kv_dtype), job.concurrency, job.context);
    if (run.has_architecture)
      header += fmt::format(
          "\n# KV cache {:.4f} MB per token for the whole model ({:.2f} GB per "
          "sequence)",
          run.kv_bytes_per_token / 1e6,
          run.kv_bytes_per_token * static_cast<double>(job.context) / 1e9);
    return header;
  }
  const TrainingMemoryJob& job = *run.training;
  return fmt::format(
      "training, {}, ZeRO-{}{}, recompute {}, sp {}, schedule {}\n# seq {}, global batch {}, "
      "micro-batch {}, {}; worst pipeline stage {} of {}",
      to_string(cfg.mesh), cfg.zero,
      cfg.zero == 3 ? (cfg.reshard_after_forward ? " (reshard after forward)" : " (no reshard)")
                    : "",
      recompute_label(cfg), cfg.sp ? "on" : "off", to_string(cfg.schedule), job.seq,
      job.global_batch, job.micro_batch, name_of(job.dtype), b.stage, cfg.mesh.pp);
}

}  // namespace

MemoryBreakdown reported_memory(const MemoryRun& run) {
  return run.serving ? run.replica : worst_stage(run.stages);
}

std::string memory_text(const MemoryRun& run) {
  const MemoryBreakdown b = reported_memory(run);
  std::string out =
      fmt::format("# meshsim memory: {} ({:.2f} B parameters, {:.2f} B active per token)\n",
                  run.model, run.params.total / 1e9, run.params.active / 1e9);
  out += "# " + job_header(run, b) + "\n";
  out += fmt::format("# GPU {} ({} GB); GB = 10^9 bytes\n", run.gpu, gb(run.gpu_bytes));
  if (!b.activations_modeled)
    out +=
        "# the model is given by its parameter count only: activations, workspaces and "
        "KV cache need an architecture and are not included\n";
  out += fmt::format("{:<16}{:>12}\n", "category", "GB per GPU");
  for (const auto& c : memory_categories(b))
    out += fmt::format("{:<16}{:>12}\n", c.name, gb(c.bytes));
  out += fmt::format("{:<16}{:>12}\n", "model state", gb(b.model_state()));
  out += fmt::format("{:<16}{:>12}\n", "total", gb(b.total()));
  // With a pipeline, every stage's total (stage 0 first): the first holds the most micro-batches'
  // activations under 1F1B, the last the LM head.
  if (run.stages.size() > 1) {
    std::vector<std::string> totals;
    for (const auto& s : run.stages) totals.push_back(gb(s.total()));
    out += fmt::format("{:<16}{}\n", "total by stage", fmt::join(totals, " "));
    // The split those totals are for: each stage's layers (its chunks' with interleaving).
    const auto& chunks = run.training ? run.training->chunk_layers : std::vector<std::int64_t>{};
    if (!chunks.empty() && chunks.size() % run.stages.size() == 0) {
      std::vector<std::int64_t> layers(run.stages.size(), 0);
      for (std::size_t g = 0; g < chunks.size(); ++g) layers[g % layers.size()] += chunks[g];
      out += fmt::format("{:<16}{}", "layers by stage", fmt::join(layers, " "));
      if (chunks.size() > layers.size()) out += fmt::format(" (chunks {})", fmt::join(chunks, " "));
      out += "\n";
    }
  }
  if (b.total() <= run.gpu_bytes)
    out += fmt::format("verdict: fits ({} GB free of {})\n", gb(run.gpu_bytes - b.total()),
                       gb(run.gpu_bytes));
  else
    out += fmt::format("verdict: does not fit ({} GB over {})\n", gb(b.total() - run.gpu_bytes),
                       gb(run.gpu_bytes));
  for (const auto& n : run.notes) out += "note: " + n + "\n";
  return out;
}

Json memory_run_json(const MemoryRun& run) {
  const MemoryBreakdown b = reported_memory(run);
  Json j;
  j["params"] = {{"total", run.params.total}, {"active", run.params.active}};
  if (run.serving) {
    j["kv_bytes_per_token"] = run.kv_bytes_per_token;
  } else {
    j["stage"] = b.stage;
    Json per_stage = Json::array();
    for (const auto& s : run.stages) per_stage.push_back(s.total());
    j["stage_total_bytes"] = per_stage;
    // Layers per model chunk, as train's and search's "stage_layers" (pp × virtual stages).
    if (run.training) j["stage_layers"] = run.training->chunk_layers;
  }
  j["mode"] = run.serving ? "serve" : "train";
  j["mesh"] = mesh_json(run.config->mesh);
  j["per_gpu_bytes"] = memory_json(b);
  j["model_state_bytes"] = b.model_state();
  j["total_bytes"] = b.total();
  j["gpu_bytes"] = run.gpu_bytes;
  j["gpu"] = run.gpu;
  j["fits"] = b.total() <= run.gpu_bytes;
  j["activations_modeled"] = b.activations_modeled;
  j["notes"] = run.notes;
  return j;
}

}  // namespace meshsim
