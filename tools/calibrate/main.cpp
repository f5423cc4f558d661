// meshsim-calibrate --out RAW.json [gemm|attention|membw|p2p|nccl|interference|launch|topo ...]
// Runs the chosen microbenchmarks (all of them by default) on the GPUs of this machine and
// writes meshsim's raw calibration JSON (tools/calibrate/README.md), merged into RAW.json when
// it already exists, so sections can be measured one at a time. A section that cannot run here
// (one GPU, no NVLink, no NVML, no fp8) is skipped with a note in the file, never a crash.
// Then: meshsim calibrate fit --raw RAW.json --out PROFILE.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "harness.hpp"

int main(int argc, char** argv) {
  using namespace calib;
  CLI::App app{"meshsim-calibrate: GEMM, attention, HBM, P2P, NCCL and topology microbenchmarks"};
  std::string out_path;
  std::vector<std::string> sections;
  Options o;
  app.add_option("--out", out_path, "Raw JSON to write (merged if it exists)")->required();
  app.add_option("sections", sections,
                 "gemm attention membw p2p nccl interference launch topo (default: all)")
      ->check(CLI::IsMember(
          {"gemm", "attention", "membw", "p2p", "nccl", "interference", "launch", "topo"}));
  app.add_option("--warmup", o.warmup, "Warm-up runs per point")->check(CLI::Range(0, 1000));
  app.add_option("--repeats", o.repeats, "Timed runs per point (median)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--hidden", o.hidden, "Model hidden size for the GEMM shapes");
  app.add_option("--ffn", o.ffn, "Model MLP size");
  app.add_option("--heads", o.heads, "Attention heads");
  app.add_option("--kv-heads", o.kv_heads, "KV heads");
  app.add_option("--head-dim", o.head_dim, "Head dimension");
  app.add_option("--max-bytes", o.max_bytes, "Largest buffer or message of the sweeps");
  CLI11_PARSE(app, argc, argv);
  if (sections.empty())
    sections = {"gemm", "attention", "membw", "p2p", "nccl", "interference", "launch", "topo"};

  Json out = Json::object();
  if (std::filesystem::exists(out_path)) {
    std::ifstream in(out_path);
    try {
      out = Json::parse(in);
    } catch (const Json::exception& e) {
      std::cerr << "error: " << out_path << ": not JSON (" << e.what() << ")\n";
      return 2;
    }
  }
  std::vector<std::string> notes;
  if (out.contains("notes") && out["notes"].is_array())
    for (const auto& n : out["notes"])
      if (n.is_string()) notes.push_back(n.get<std::string>());
  out["harness"] = "meshsim-calibrate 1";
  out["environment"] = environment();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  int status = 0;
  if (devices == 0) {
    notes.push_back("no CUDA device visible: nothing measured");
    status = 3;
  } else {
    const std::map<std::string, void (*)(const Options&, Json&, std::vector<std::string>&)> run = {
        {"gemm", bench_gemm},    {"attention", bench_attention},
        {"membw", bench_membw},  {"p2p", bench_p2p},
        {"nccl", bench_nccl},    {"interference", bench_interference},
        {"launch", bench_launch}};
    for (const auto& s : sections) {
      std::cerr << "meshsim-calibrate: " << s << "\n";
      try {
        if (s == "topo")
          node_topology(out, notes);
        else
          run.at(s)(o, out, notes);
      } catch (const std::exception& e) {
        notes.push_back(s + ": stopped: " + e.what());
        cudaGetLastError();
      }
    }
  }
  // A file measured section by section (tools/calibrate/device/run.sh) gets the same note once.
  std::vector<std::string> unique;
  for (auto& n : notes)
    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(std::move(n));
  out["notes"] = unique;
  std::ofstream f(out_path);
  if (!f) {
    std::cerr << "error: cannot write " << out_path << "\n";
    return 2;
  }
  f << out.dump(1) << "\n";
  for (const auto& n : unique) std::cerr << "note: " << n << "\n";
  return status;
}
