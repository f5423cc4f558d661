// meshsim collective --topology T [--nodes N] --op OP (--gpus N | --group 0-7,16)
//                    [--sizes 8:8G] [--algo auto|ring|tree|nvls|hier|direct] [--json]
// A table like nccl-tests: size, count, type, time, algbw, busbw, and the algorithm chosen.

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "core/enum_names.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "job_args.hpp"
#include "network/collective_runner.hpp"
#include "report/collective_report.hpp"
#include "topology/topology_loader.hpp"

namespace meshsim::cli {
namespace {

struct CollectiveArgs {
  ClusterArgs cluster;
  std::string op;
  std::int32_t gpus = 0;
  std::string group;
  std::string sizes = "8:8G";
  std::string algo = "auto";
  std::string calibration;
};

// "0-7,16" → {0..7, 16}
std::vector<std::int32_t> parse_group(const std::string& text, std::size_t gpu_count) {
  std::vector<std::int32_t> out;
  std::size_t pos = 0;
  auto bad = [&](const std::string& why) -> std::vector<std::int32_t> {
    throw Error("", "--group", "'" + text + "': " + why);
  };
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const auto item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const auto dash = item.find('-');
    try {
      std::size_t used = 0;
      const long first = std::stol(item.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? item.size() : dash)) return bad("expected numbers");
      long last = first;
      if (dash != std::string::npos) {
        const auto rest = item.substr(dash + 1);
        last = std::stol(rest, &used);
        if (used != rest.size()) return bad("expected numbers");
      }
      if (first < 0 || last < first) return bad("ranges must be ascending and non-negative");
      if (static_cast<std::size_t>(last) >= gpu_count)
        return bad("GPU " + std::to_string(last) + " does not exist (the cluster has " +
                   std::to_string(gpu_count) + ")");
      for (long g = first; g <= last; ++g) out.push_back(static_cast<std::int32_t>(g));
    } catch (const std::logic_error&) {
      return bad("expected a list like 0-7,16");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<std::int32_t> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return bad("a GPU appears twice");
  return out;
}

// "8:8G" → 8, 16, ..., 8G (×2 steps); "1M" → {1M}.
std::vector<double> parse_sizes(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {parse_size(text, "", "--sizes").as_double()};
  const auto lo = parse_size(text.substr(0, colon), "", "--sizes").as_double();
  const auto hi = parse_size(text.substr(colon + 1), "", "--sizes").as_double();
  if (lo <= 0 || hi < lo) throw Error("", "--sizes", "'" + text + "': need 0 < first <= last");
  std::vector<double> out;
  for (double s = lo; s <= hi; s *= 2) out.push_back(s);
  return out;
}

int run_collective_command(const CollectiveArgs& a) {
  const auto op = parse_collective_op(a.op);
  if (!op)
    throw Error("", "--op",
                "unknown operation '" + a.op + "' (" + joined_names(kAllCollectiveOps, "|") + ")");
  std::optional<CollectiveAlgo> algo;
  if (a.algo != "auto") {
    algo = parse_collective_algo(a.algo);
    if (!algo)
      throw Error("", "--algo",
                  "unknown algorithm '" + a.algo + "' (auto|ring|tree|nvls|hier|direct)");
  }
  Topology topo = a.cluster.load();
  const auto profile = calibration_for(topo, a.calibration);
  std::vector<std::int32_t> ranks;
  if (!a.group.empty() && a.gpus != 0)
    throw Error("", "--gpus", "give --gpus or --group, not both");
  if (!a.group.empty()) {
    ranks = parse_group(a.group, topo.gpu_count());
  } else {
    if (a.gpus <= 0) throw Error("", "--gpus", "give --gpus N (N > 0) or --group");
    if (static_cast<std::size_t>(a.gpus) > topo.gpu_count())
      throw Error("", "--gpus",
                  std::to_string(a.gpus) + " GPUs asked, the cluster has " +
                      std::to_string(topo.gpu_count()));
    for (std::int32_t g = 0; g < a.gpus; ++g) ranks.push_back(g);
  }
  if (*op == CollectiveOp::send_recv && ranks.size() < 2)
    throw Error("", "--gpus", "send_recv needs at least 2 ranks");
  const auto sizes = parse_sizes(a.sizes);

  // Price every size first: an error must not leave half a table on stdout.
  Router router(topo);
  CollectiveCostCache cache;
  CollectiveSweep sweep{*op, ranks.size(), topo.name, topo.gpu_count(), {}};
  for (double bytes : sizes) {
    const CollectiveCall call{*op, ranks, bytes};
    const auto priced = price_collective(topo, router, call, algo, &cache);
    // A measured fit for this collective replaces the model's level (the algorithm column still
    // says what the model chose).
    const double t =
        (profile ? calibrated_collective_time(profile->links, topo, call, priced.time, priced.time)
                 : priced.time)
            .seconds();
    sweep.rows.push_back(
        {bytes, t,
         std::string(name_of(priced.algo)) + "/" + std::string(name_of(priced.protocol))});
  }
  cli_out() << (a.cluster.json ? json_text(collective_json(sweep)) + "\n" : collective_text(sweep));
  return 0;
}

}  // namespace

Runner add_collective_command(CLI::App& app) {
  auto args = std::make_shared<CollectiveArgs>();
  auto* cmd =
      app.add_subcommand("collective", "Price a collective over a size sweep, like nccl-tests");
  args->cluster.add_to(cmd);
  cmd->add_option("--op", args->op,
                  "all_reduce|all_gather|reduce_scatter|all_to_all|broadcast|reduce|send_recv")
      ->required();
  cmd->add_option("--gpus", args->gpus, "Use the first N GPUs");
  cmd->add_option("--group", args->group, "Explicit ranks, e.g. 0-7,16");
  cmd->add_option("--sizes", args->sizes, "Message sizes: 8:8G (x2 steps) or one size")
      ->capture_default_str();
  cmd->add_option("--algo", args->algo, "auto|ring|tree|nvls|hier|direct")->capture_default_str();
  cmd->add_option("--calibration", args->calibration,
                  "Calibration profile: measured link and collective fits replace the model's");
  return [args] { return run_collective_command(*args); };
}

}  // namespace meshsim::cli
