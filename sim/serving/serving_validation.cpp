#include "serving/serving_validation.hpp"

#include "core/case_file.hpp"
#include "core/json_reader.hpp"
#include "model/model_loader.hpp"
#include "parallel/mesh.hpp"
#include "serving/engine.hpp"
#include "serving/serving_sim.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim {
namespace {

DType dtype_of(const JsonRef& ref) {
  const auto s = ref.string();
  const auto d = parse_dtype(s);
  if (!d || (*d != DType::bf16 && *d != DType::fp16 && *d != DType::fp8))
    ref.fail("'" + s + "': expected bf16, fp16 or fp8");
  return *d;
}

double metric_of(const ServingResult& r, const JsonRef& ref, std::string& unit) {
  const auto m = ref.string();
  unit = "s";
  if (m == "output_tokens_per_s") {
    unit = "tokens/s";
    return r.output_tokens_per_s;
  }
  if (m == "requests_per_s") {
    unit = "req/s";
    return r.requests_per_s;
  }
  if (m == "ttft_p50_s") return r.ttft.p50;
  if (m == "ttft_p99_s") return r.ttft.p99;
  if (m == "tpot_p50_s") return r.tpot.p50;
  if (m == "tpot_p99_s") return r.tpot.p99;
  ref.fail("unknown metric '" + m +
           "' (known: output_tokens_per_s, requests_per_s, ttft_p50_s, ttft_p99_s, tpot_p50_s, "
           "tpot_p99_s)");
}

}  // namespace

std::vector<ValidationRow> run_serving_cases(const std::string& path, const std::string& root,
                                             const std::string& only) {
  const auto file = read_case_file(path);
  const auto& cases = file.cases;
  std::vector<ValidationRow> rows;
  for (const auto& c : cases) {
    ObjectReader r(c);
    const auto name = r.required("name").string();
    const auto group = r.required("group").string();
    const auto topo_file = r.required("topology").file_name();
    const auto model_file = r.required("workload").file_name();
    ServingSetup s;
    const auto mesh_ref = r.required("mesh");
    const Mesh mesh = parse_mesh(mesh_ref.string(), path + ":" + mesh_ref.path());
    s.shape.tp = mesh.tp;
    s.shape.pp = mesh.pp;
    // The engine the source ran: its scheduler, KV budget and KV dtype rule; the case's own
    // settings (each with its reading) override them.
    const auto engine_ref = r.required("engine");
    const auto engine = [&] {
      const auto engine_name = engine_ref.string();
      if (const auto* e = bundled_engine(engine_name)) return *e;
      engine_ref.fail("'" + engine_name + "' is not a bundled engine");
    }();
    s.scheduler = engine.scheduler;
    if (auto v = r.optional("replicas")) s.replicas = v->positive_integer();
    if (auto v = r.optional("dtype")) s.shape.weight_dtype = dtype_of(*v);
    s.shape.kv_dtype = default_kv_dtype(engine, s.shape.weight_dtype);
    if (auto v = r.optional("kv_dtype")) s.shape.kv_dtype = dtype_of(*v);
    if (auto v = r.optional("max_seqs")) s.scheduler.max_seqs = v->positive_integer();
    if (auto v = r.optional("max_batch_tokens"))
      s.scheduler.max_batch_tokens = v->positive_integer();
    if (auto v = r.optional("slo_ttft_s")) s.slo_ttft_s = v->positive_number();
    if (auto v = r.optional("slo_tpot_s")) s.slo_tpot_s = v->positive_number();
    ObjectReader t(r.required("traffic"));
    TrafficSpec spec;
    const auto rate = t.required("rate");
    spec.arrival = arrival_from_rate(
        rate.raw().is_string() ? rate.string() : std::to_string(rate.positive_number()), 1,
        path + ":" + rate.path());
    for (auto [key, dist] :
         {std::pair{"prompt", &spec.prompt}, std::pair{"output", &spec.output}}) {
      const auto v = t.required(key);
      *dist = parse_length_dist(v.string(), path, v.path());
    }
    spec.requests = t.required("requests").positive_integer();
    if (auto v = t.optional("seed")) spec.seed = static_cast<std::uint64_t>(v->positive_integer());
    t.finish();
    const auto metrics = r.required("metrics").non_empty_array();
    const auto source = r.required("source").string();
    const auto reading = r.required("reading").string();
    r.finish();
    if (!only.empty() && name.find(only) == std::string::npos) continue;
    const auto topo = load_topology(root + "/topologies/" + topo_file);
    const auto model = load_model(root + "/workloads/models/" + model_file);
    const auto result = simulate_serving(topo, model, s, generate_requests(spec));
    for (const auto& m : metrics) {
      ObjectReader mr(m);
      ValidationRow row;
      row.group = group;
      row.name = name;
      const auto metric = mr.required("metric");
      row.metric = metric.string();
      row.simulated = metric_of(result, metric, row.unit);
      row.measured = mr.required("measured").positive_number();
      mr.finish();
      row.source = source;
      row.reading = reading;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace meshsim
