// meshsim calibrate fit --raw RAW.json [--nccl-tests LOG ...] --out PROFILE.json
// meshsim calibrate nccl-topo --xml NCCL_TOPO.xml --out NODE.json
// meshsim calibrate kineto --trace STEP.json [--topology T --workload W --mesh ... job flags]
//                          [--write-profile PROFILE.json]
// The calibration loop: raw harness output (tools/calibrate) and nccl-tests logs become a
// calibration profile; an NCCL topology dump becomes a cluster file of the node; a PyTorch
// profiler trace of a real step is read as per-op times, compared side by side with the
// simulated step of the same configuration, and its GEMM shapes can seed a profile.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "compute/calibration_fit.hpp"
#include "compute/compute_model.hpp"
#include "compute/kineto_trace.hpp"
#include "job_args.hpp"
#include "network/nccl_tests_log.hpp"
#include "report/kineto_report.hpp"
#include "topology/nccl_topo_xml.hpp"
#include "topology/topology_summary.hpp"
#include "training/training_sim.hpp"

namespace meshsim::cli {
namespace {

struct FitArgs {
  std::string raw, out, gpu, nccl_op, topology_out, base = "bundled";
  std::vector<std::string> nccl_tests;
  bool include_unfused = false, json = false, no_points = false;
};

struct CalibrateTopoArgs {
  std::string xml, out, gpu, name = "nccl-topo-node";
  bool json = false;
};

struct KinetoArgs {
  std::string trace, topology, write_profile, calibration;
  std::int32_t nodes = 0, device = 0;
  JobArgs job;
  bool json = false;
};

void write_json(const std::string& path, const Json& j, const char* flag) {
  write_output(path, flag, [&](std::ostream& out) { out << json_text(j) << "\n"; });
}

int run_fit(const FitArgs& a) {
  if (a.out.empty()) throw Error("", "--out", "give the profile to write");
  if (a.raw.empty() && a.nccl_tests.empty())
    throw Error("", "--raw", "give harness output (--raw) or nccl-tests logs (--nccl-tests)");
  if (!a.gpu.empty() && !find_gpu(a.gpu))
    throw Error("", "--gpu", "unknown GPU '" + a.gpu + "' (see the catalogue: meshsim topo)");
  if (!a.nccl_op.empty() && !parse_collective_op(a.nccl_op))
    throw Error("", "--nccl-op", "'" + a.nccl_op + "' is not a collective");
  FitOptions opt;
  opt.gpu = a.gpu;
  opt.include_unfused_attention = a.include_unfused;
  opt.keep_points = !a.no_points;
  if (a.base == "generic") {
    opt.base = generic_kernel_params();
  } else if (a.base != "bundled") {
    const auto base = load_calibration_profile(a.base);
    const auto gpu = find_gpu(base.gpu);
    if (!gpu) throw Error(a.base, "/gpu", "GPU '" + base.gpu + "' is not in the catalogue");
    opt.base = ComputeModel(*gpu, base).params();
    opt.base_model = base.model;
  }
  FitResult fit;
  if (!a.raw.empty()) {
    const Json doc = load_json_file(a.raw);
    fit = fit_calibration(JsonRef::root(doc, a.raw), opt);
  }
  std::vector<NcclTestsLog> logs;
  for (const auto& f : a.nccl_tests) logs.push_back(read_nccl_tests_log(f, a.nccl_op));
  if (a.raw.empty()) {
    fit.profile.gpu = a.gpu.empty() ? catalogue_gpu_name(logs.front().gpu) : a.gpu;
    if (fit.profile.gpu.empty())
      throw Error(logs.front().file, "",
                  "cannot tell the GPU model from '" + logs.front().gpu + "'; give it with --gpu");
    fit.profile.source = "fitted by meshsim calibrate fit from nccl-tests logs";
  }
  if (opt.base_model) fit.profile.source += "; parts not measured there from " + a.base;
  for (const auto& log : logs) {
    fit.lines.push_back(add_collective_fit(fit.profile.links, log));
    fit.profile.source += "; " + log.file;
  }
  // The written profile must read back: validate it like any input.
  const Json out = to_json(fit.profile);
  (void)read_calibration_profile(JsonRef::root(out, a.out));
  write_json(a.out, out, "--out");
  if (!a.topology_out.empty()) {
    const Json doc = load_json_file(a.raw);
    if (!doc.contains("topology"))
      throw Error(a.raw, "/topology", "no topology section (run the harness's topo command)");
    write_json(a.topology_out, doc["topology"], "--topology-out");
  }
  if (a.json) {
    cli_out() << json_text(Json{{"out", a.out},
                                {"gpu", fit.profile.gpu},
                                {"source", fit.profile.source},
                                {"fits", fit.lines},
                                {"profile", out}})
              << "\n";
    return 0;
  }
  cli_out() << fmt::format("# calibration profile for {} written to {}\n", fit.profile.gpu, a.out);
  for (const auto& l : fit.lines) cli_out() << l << "\n";
  return 0;
}

int run_nccl_topo(const CalibrateTopoArgs& a) {
  if (a.out.empty()) throw Error("", "--out", "give the cluster file to write");
  NcclTopoOptions opt;
  opt.name = a.name;
  opt.gpu = a.gpu;
  const Json topo = nccl_topo_to_topology(a.xml, opt);
  // Checked before it is written; what fails names the dump it came from.
  const auto loaded = load_topology_json(topo, a.xml + " (converted)");
  write_json(a.out, topo, "--out");
  const auto s = summarize(loaded, false);
  if (a.json) {
    cli_out()
        << json_text(
               Json{{"out", a.out},
                    {"description", topo["description"]},
                    {"gpu", loaded.gpu.model},
                    {"gpus", loaded.gpus().size()},
                    {"per_gpu_Bps",
                     {{"nvlink", s.nvlink_Bps}, {"pcie", s.pcie_Bps}, {"network", s.network_Bps}}}})
        << "\n";
    return 0;
  }
  cli_out() << fmt::format("# wrote {}: {} (GPU {})\n", a.out,
                           topo["description"].get<std::string>(), loaded.gpu.model);
  cli_out() << fmt::format(
      "per GPU, per direction: NVLink {:.0f} GB/s, PCIe {:.0f} GB/s, network "
      "{:.1f} GB/s\n",
      s.nvlink_Bps / 1e9, s.pcie_Bps / 1e9, s.network_Bps / 1e9);
  return 0;
}

int run_kineto(const KinetoArgs& a) {
  const auto m = read_kineto_trace(a.trace, a.device);
  ClusterArgs c;
  c.topology = a.topology;
  c.nodes = a.nodes;
  auto topo = c.load();
  const auto job = a.job.resolve(static_cast<std::int64_t>(topo.gpus().size()));
  auto setup = training_setup(job);
  setup.profile = calibration_for(topo, a.calibration);
  const auto r = simulate_training(topo, job.workload.model, setup);
  const ComputeModel kernels(topo.gpu, setup.profile);
  // The profile is written before anything is printed: an error must not follow a report.
  if (!a.write_profile.empty()) {
    if (m.gemm_points.empty() && !m.host_per_kernel_s)
      throw Error(a.trace, "",
                  "no GEMM shapes (profile with record_shapes=True) and no host launch times "
                  "(ProfilerActivity.CPU) to write");
    CalibrationProfile p;
    p.gpu = topo.gpu.model;
    p.source = "GEMM kernel times and host launch gaps from the PyTorch profiler trace " + a.trace;
    p.gemm = m.gemm_points;
    p.host_per_kernel_s = m.host_per_kernel_s;
    write_json(a.write_profile, to_json(p), "--write-profile");
  }
  const KinetoComparison comparison{a.trace, &m, topo.name, job.config.mesh, &r, &kernels};
  if (!a.json) {
    cli_out() << kineto_text(comparison);
    return 0;
  }
  Json doc = kineto_json(comparison);
  if (!a.write_profile.empty()) doc["profile_written"] = a.write_profile;
  cli_out() << json_text(doc) << "\n";
  return 0;
}

}  // namespace

Runner add_calibrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Calibration: fit profiles, import real-node data");
  cmd->require_subcommand(1);
  auto fit = std::make_shared<FitArgs>();
  auto* f = cmd->add_subcommand("fit", "Raw harness JSON and nccl-tests logs -> profile");
  f->add_option("--raw", fit->raw, "Harness output (tools/calibrate/meshsim-calibrate)");
  f->add_option("--nccl-tests", fit->nccl_tests, "nccl-tests output logs (repeatable)");
  f->add_option("--nccl-op", fit->nccl_op, "The collective of logs that do not name it");
  f->add_option("--gpu", fit->gpu, "GPU catalogue name, when the raw file's is not known");
  f->add_flag("--include-unfused-attention", fit->include_unfused,
              "Keep attention rows of the harness's unfused fallback");
  f->add_option("--base", fit->base,
                "Kernel parameters the fit starts from and keeps where nothing was measured: "
                "bundled (the GPU's bundled fit), generic, or a profile");
  f->add_flag("--no-points", fit->no_points,
              "Write only the fitted kernel parameters, not the measured points");
  f->add_option("--out", fit->out, "Profile to write")->required();
  f->add_option("--topology-out", fit->topology_out, "Also write the raw file's node topology");
  f->add_flag("--json", fit->json, "Print one JSON document (the fits and the written profile)");
  auto topo = std::make_shared<CalibrateTopoArgs>();
  auto* t = cmd->add_subcommand("nccl-topo", "NCCL topology XML -> meshsim cluster file");
  t->add_option("--xml", topo->xml, "NCCL_TOPO_DUMP_FILE output")->required();
  t->add_option("--out", topo->out, "Cluster file to write")->required();
  t->add_option("--gpu", topo->gpu, "GPU catalogue name (default: from the SM version)");
  t->add_option("--name", topo->name, "Cluster name");
  t->add_flag("--json", topo->json, "Print one JSON document");
  auto kin = std::make_shared<KinetoArgs>();
  auto* k = cmd->add_subcommand("kineto", "PyTorch profiler trace -> per-op times vs simulated");
  k->add_option("--trace", kin->trace, "Chrome trace JSON of real steps")->required();
  k->add_option("--device", kin->device, "CUDA device whose kernels to read");
  k->add_option("--topology", kin->topology, "Cluster to simulate the same job on")->required();
  k->add_option("--nodes", kin->nodes, "Rebuild a parametric cluster with N nodes")
      ->check(positive_count());
  k->add_option("--calibration", kin->calibration, "Calibration profile for the simulation");
  k->add_option("--write-profile", kin->write_profile,
                "Write the trace's GEMM shapes as a profile");
  kin->job.add_to(k);
  k->add_flag("--json", kin->json, "Print one JSON document (measured and simulated per part)");
  return [f, t, fit, topo, kin] {
    if (f->parsed()) return run_fit(*fit);
    if (t->parsed()) return run_nccl_topo(*topo);
    return run_kineto(*kin);
  };
}

}  // namespace meshsim::cli
