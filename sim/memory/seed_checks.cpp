#include "memory/seed_checks.hpp"

#include <fmt/format.h>

#include "core/case_file.hpp"
#include "core/json_reader.hpp"
#include "memory/memory_model.hpp"
#include "model/model_loader.hpp"
#include "model/param_count.hpp"

namespace meshsim {

std::vector<ValidationRow> run_seed_checks(const std::string& path, const std::string& root,
                                           const std::string& only) {
  const auto file = read_case_file(path);
  const auto& cases = file.cases;
  std::vector<ValidationRow> rows;
  for (const auto& c : cases) {
    ObjectReader r(c);
    ValidationRow row;
    row.group = "seed-checks";
    row.name = r.required("name").string();
    const auto check = r.required("check");
    const auto model = load_model(root + "/workloads/models/" + r.required("workload").file_name());
    std::int64_t gpus = 1, zero = 0, seq = 0;
    if (auto v = r.optional("gpus")) gpus = v->positive_integer();
    if (auto v = r.optional("zero")) zero = v->integer();
    if (auto v = r.optional("seq")) seq = v->positive_integer();
    row.unit = r.required("unit").string();
    const double scale = row.unit == "GB" ? 1e9 : row.unit == "MB" ? 1e6 : 0;
    if (scale == 0) r.required("unit").fail("expected GB or MB");
    row.measured = r.required("seed").positive_number();
    const double rounding = r.required("rounding").positive_number();
    row.tolerance = 0.5 * rounding / row.measured;
    row.source = r.required("source").string();
    r.finish();
    if (!only.empty() && row.name.find(only) == std::string::npos) continue;
    const auto kind = check.string();
    row.metric = kind;
    if (kind == "bf16_weights") {
      row.simulated = count_params(model).total * 2 / scale;
      row.detail = fmt::format("{:.3f} B parameters × 2 bytes", count_params(model).total / 1e9);
    } else if (kind == "model_state_per_gpu") {
      ParallelConfig cfg;
      cfg.mesh.dp = gpus;
      cfg.zero = static_cast<std::int32_t>(zero);
      TrainingMemoryJob job;
      job.seq = 1;
      job.global_batch = gpus;
      MemoryOptions opt;
      opt.recipe = default_recipe(DType::bf16);
      const auto m = worst_stage(training_memory_per_stage(model, job, cfg, opt));
      row.simulated = m.model_state() / scale;
      row.detail = fmt::format("ZeRO-{} over {} GPUs: weights + gradients + optimizer", zero, gpus);
    } else if (kind == "kv_per_token") {
      row.simulated = kv_bytes_per_token(model, DType::bf16) / scale;
      row.detail = "2 × layers × KV heads × head dim × 2 bytes";
    } else if (kind == "kv_per_sequence") {
      row.simulated = kv_bytes_per_token(model, DType::bf16) * static_cast<double>(seq) / scale;
      row.detail = fmt::format("{} tokens", seq);
    } else {
      check.fail("unknown check '" + kind +
                 "' (known: bf16_weights, model_state_per_gpu, kv_per_token, kv_per_sequence)");
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace meshsim
