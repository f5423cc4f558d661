#include <doctest/doctest.h>

#include "core/error.hpp"
#include "model/model_loader.hpp"
#include "parallel/mesh_rules.hpp"
#include "parallel/placement.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::source_path;

TEST_CASE("mesh parsing") {
  const auto m = parse_mesh("tp=8,dp=4,pp=4,cp=4", "--mesh");
  CHECK(m == Mesh{4, 8, 4, 4, 1});
  CHECK(m.world() == 512);
  CHECK(to_string(m) == "dp=4 tp=8 pp=4 cp=4 ep=1");
  // EP is folded into DP × CP: it adds no ranks.
  const auto e = parse_mesh("dp=8,ep=4,cp=2", "--mesh");
  CHECK(e.world() == 16);
  CHECK(e.expert_replicas() == 4);
  CHECK(e.dense_replicas() == 16);
  CHECK_THROWS_WITH_AS(parse_mesh("dp=0", "--mesh"),
                       "--mesh: 'dp=0': degree '0' of dp is not a positive integer", Error);
  CHECK_THROWS_WITH_AS(parse_mesh("dp=2,xp=2", "--mesh"),
                       "--mesh: 'dp=2,xp=2': unknown degree 'xp' (known: dp, tp, pp, cp, ep, fsdp)",
                       Error);
  CHECK_THROWS_WITH_AS(parse_mesh("dp=2,dp=4", "--mesh"), "--mesh: 'dp=2,dp=4': dp is given twice",
                       Error);
  CHECK_THROWS_WITH_AS(parse_mesh("dp=6,ep=4", "--mesh"),
                       "--mesh: 'dp=6,ep=4': ep=4 must divide dp·cp = 6 (expert parallelism is "
                       "folded into DP × CP)",
                       Error);
  CHECK_THROWS_AS(parse_mesh("dp", "--mesh"), Error);
  CHECK_THROWS_AS(parse_mesh("", "--mesh"), Error);
  CHECK_THROWS_AS(parse_mesh("dp=99999999999999999999", "--mesh"), Error);
}

TEST_CASE("a mesh without dp fills the cluster's GPUs") {
  CHECK(parse_mesh("tp=8,pp=4", "--mesh", 512) == Mesh{16, 8, 4, 1, 1});  // 512 / 32
  CHECK(parse_mesh("tp=8,pp=4", "--mesh") == Mesh{1, 8, 4, 1, 1});        // no cluster: dp = 1
  CHECK(parse_mesh("dp=2,tp=8", "--mesh", 512).dp == 2);                  // a given dp stays
  // The checks that need dp run on the inferred one: ep divides dp·cp, fsdp divides dp.
  CHECK(parse_mesh("tp=8,ep=8", "--mesh", 64).expert_replicas() == 1);
  CHECK(parse_mesh("tp=8,fsdp=4", "--mesh", 512).shard_replicas() == 16);
  CHECK_THROWS_WITH_AS(parse_mesh("tp=3", "--mesh", 16),
                       "--mesh: 'tp=3': dp is left out, and tp·pp·cp = 3 does not divide the "
                       "cluster's 16 GPUs",
                       Error);
  CHECK_THROWS_AS(parse_mesh("tp=8,ep=16", "--mesh", 64), Error);  // dp = 8 < ep
}

TEST_CASE("schedules and layer splits") {
  CHECK(to_string(parse_schedule("interleaved:4", "--schedule")) == "interleaved:4");
  CHECK(parse_schedule("zb", "--schedule").kind == ScheduleKind::zero_bubble);
  CHECK_THROWS_AS(parse_schedule("interleaved:0", "--schedule"), Error);
  CHECK_THROWS_AS(parse_schedule("pipedream", "--schedule"), Error);
  // Families, as a stack names the schedules it runs.
  for (const auto& [text, family] : std::vector<std::pair<std::string, std::string>>{
           {"gpipe", "gpipe"},
           {"1f1b", "1f1b"},
           {"interleaved:1", "1f1b"},
           {"interleaved:2:8", "interleaved"},
           {"interleaved-overlap:2", "interleaved-overlap"},
           {"zb", "zb"},
           {"1f1b-overlap", "1f1b-overlap"}})
    CHECK(schedule_family(parse_schedule(text, "--schedule")) == family);
  CHECK(split_layers(8, 4) == std::vector<std::int64_t>{2, 2, 2, 2});
  // Llama 3 405B: 126 layers on 16 stages, remainder to the middle stages.
  const auto s = split_layers(126, 16);
  CHECK(s.size() == 16);
  CHECK(s.front() == 7);
  CHECK(s.back() == 7);
  std::int64_t sum = 0;
  for (auto v : s) sum += v;
  CHECK(sum == 126);
  CHECK(split_layers(5, 4) == std::vector<std::int64_t>{1, 1, 2, 1});
}

TEST_CASE("mesh rules, one precise error each") {
  const auto llama = load_model(source_path("workloads/models/llama3.1-70b.json"));
  const auto mix = load_model(source_path("workloads/models/mixtral-8x7b.json"));
  ParallelConfig c;
  auto err = [&](const ModelSpec& m, const std::string& mesh, MeshJob job, bool sp = true) {
    c.mesh = parse_mesh(mesh, "--mesh");
    c.sp = sp && c.mesh.tp > 1;
    try {
      check_mesh(m, c, job);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("ok");
  };
  // The seed's two 512-GPU candidates for a 70B model at 32K context.
  CHECK(err(llama, "tp=8,pp=4,cp=4,dp=4", {32768, 512, 1, true, {}}) == "ok");
  CHECK(err(llama, "tp=8,pp=8,cp=2,dp=4", {32768, 512, 1, true, {}}) == "ok");
  CHECK(err(llama, "tp=3", {}) ==
        "--mesh: tp=3 does not divide the 64 attention heads of llama3.1-70b");
  CHECK(err(llama, "tp=32", {}) == "ok");  // 8 KV heads replicated 4×
  CHECK(err(llama, "pp=81", {}) ==
        "--mesh: pp=81 needs at least that many layers; llama3.1-70b has 80");
  CHECK(err(mix, "dp=8,ep=8,tp=1", {}) == "ok");
  CHECK(err(mix, "dp=3,ep=3", {}) == "--mesh: ep=3 does not divide the 8 experts of mixtral-8x7b");
  CHECK(err(llama, "dp=2,ep=2", {}) == "--mesh: ep=2 but llama3.1-70b has no experts");
  CHECK(err(mix, "tp=2", {}, false) ==
        "--sp: MoE layers with tp > 1 need sequence parallelism (as in Megatron-Core)");
  CHECK(err(llama, "cp=4", {4100, 0, 1, true, {}}) ==
        "--seq: sequence 4100 is not a multiple of 8 (2 × cp: causal load balancing gives each "
        "CP rank two chunks)");
  CHECK(err(llama, "dp=4", {4096, 10, 1, true, {}}) ==
        "--gbs: global batch 10 is not a multiple of dp × micro-batch = 4");
  // 2^30 sequences on one rank: 2^30 micro-batches to simulate, refused before any allocation.
  CHECK(err(llama, "dp=4", {4096, std::int64_t{1} << 30, 1, true, {}}) ==
        "--gbs: global batch 1073741824 is 268435456 micro-batches per step for dp × micro-batch "
        "= 4; the limit is 8192");
  CHECK(err(llama, "dp=4", {4096, 4 * 8192, 1, true, {}}) == "ok");
  // A batch the job file gave names the file's field; the flag overrides it.
  CHECK(err(llama, "dp=4",
            {4096, 10, 1, true, {"jobs/x.json", "/global_batch", " (--gbs overrides it)"}}) ==
        "jobs/x.json:/global_batch: global batch 10 is not a multiple of dp × micro-batch = 4 "
        "(--gbs overrides it)");
  // A launch configuration's batch names the configuration and its key.
  CHECK(
      err(llama, "dp=4", {4096, 8192 * 4 + 4, 1, true, {"", "run.sh", " (--global-batch-size)"}}) ==
      "run.sh: global batch 32772 is 8193 micro-batches per step for dp × micro-batch = 4; the "
      "limit is 8192 (--global-batch-size)");
  // Pipeline steps: with a pipeline only, each a whole number of the step's micro-batches.
  CHECK(err(llama, "dp=4,pp=2", {4096, 32, 1, true, {}, 4}) == "ok");  // 8 = 4 × 2
  CHECK(err(llama, "dp=4,pp=2", {4096, 32, 1, true, {}, 3}) ==
        "--pipeline-steps: 3 pipeline schedules do not divide the 8 micro-batches per step");
  CHECK(err(llama, "dp=4", {4096, 32, 1, true, {}, 2}) ==
        "--pipeline-steps: runs the step as 2 pipeline schedules; it needs pp > 1");
  CHECK(err(llama, "dp=4,pp=2", {4096, 32, 1, true, {}, 0}) ==
        "--pipeline-steps: must be a positive integer");
}

TEST_CASE("HSDP: fsdp shards over a sub-group of DP, replicated across the rest") {
  // dp=8, fsdp=2, cp=2, tp=2: shard groups are fsdp · cp = 4 consecutive combined (cp, dp)
  // indices; 8 · 2 / 4 = 4 replicas of each shard.
  const auto m = parse_mesh("tp=2,cp=2,dp=8,fsdp=2", "--mesh");
  CHECK(m.dp == 8);
  CHECK(m.fsdp == 2);
  CHECK(m.world() == 32);
  CHECK(m.shard_group() == 4);
  CHECK(m.shard_replicas() == 4);
  CHECK(to_string(m) == "dp=8 tp=2 pp=1 cp=2 ep=1 fsdp=2");
  CHECK(parse_mesh("dp=8,tp=2,cp=2,fsdp=2", "--mesh") == m);  // round trip of the text form
  // Plain ZeRO: the shard group is all of DP × CP.
  const auto plain = parse_mesh("tp=2,cp=2,dp=8", "--mesh");
  CHECK(plain.shard_group() == 16);
  CHECK(plain.shard_replicas() == 1);
  CHECK(parse_mesh("dp=8,fsdp=8", "--mesh").fsdp == 0);  // all of DP: plain ZeRO/FSDP
  CHECK_THROWS_WITH_AS(parse_mesh("dp=4,fsdp=128", "--mesh"),
                       "--mesh: 'dp=4,fsdp=128': fsdp=128 must divide dp=4 (dp is the whole "
                       "data-parallel degree: dp=512,fsdp=128 shards over 128 ranks and "
                       "replicates 4 times)",
                       Error);
  CHECK_THROWS_AS(parse_mesh("dp=6,fsdp=4", "--mesh"), Error);

  // Ranks (tp innermost, then cp, then dp): rank = tp + 2·cp + 4·dp. Rank 0's shard group is
  // dp 0–1 × cp 0–1 at tp 0; its replicas are the same (cp, dp mod 2) position in the other
  // three groups.
  const Placement pl(m);
  CHECK(pl.group(0, GroupKind::shard) == std::vector<std::int32_t>{0, 2, 4, 6});
  CHECK(pl.group(0, GroupKind::replica) == std::vector<std::int32_t>{0, 8, 16, 24});
  CHECK(pl.group(11, GroupKind::shard) == std::vector<std::int32_t>{9, 11, 13, 15});
  CHECK(pl.group(11, GroupKind::replica) == std::vector<std::int32_t>{3, 11, 19, 27});
  CHECK(pl.all_groups(GroupKind::shard).size() == 8);    // 4 per TP rank
  CHECK(pl.all_groups(GroupKind::replica).size() == 8);  // 4 positions per TP rank

  // HSDP needs sharded state.
  const auto llama = load_model(source_path("workloads/models/llama3.1-70b.json"));
  ParallelConfig c;
  c.mesh = parse_mesh("dp=8,fsdp=4", "--mesh");
  CHECK_THROWS_WITH_AS(check_mesh(llama, c, {}),
                       "--mesh: fsdp=4 shards ZeRO/FSDP state over a sub-group; it needs --zero 1, "
                       "2 or 3",
                       Error);
  c.zero = 3;
  CHECK_NOTHROW(check_mesh(llama, c, {}));
}
