#include "report/launch_config.hpp"

#include <doctest/doctest.h>

#include "model/model_loader.hpp"
#include "report/megatron_line.hpp"
#include "test_paths.hpp"

using namespace meshsim;
using meshsim::test::model_path;

TEST_CASE(
    "launch lines: HSDP as torchtitan's replicate × shard and Megatron's optimizer instances") {
  const auto m = load_model(model_path("llama3.1-70b"));
  ParallelConfig c;
  c.mesh = parse_mesh("tp=4,dp=128,fsdp=16", "--mesh");
  c.zero = 3;
  c.sp = true;
  const LaunchJob job{8192, 128, 1, DType::bf16, 64, 8};
  const auto titan = launch_config("torchtitan", m, c, job);
  CHECK(titan.find("data_parallel_replicate_degree = 8\n") != std::string::npos);
  CHECK(titan.find("data_parallel_shard_degree = 16\n") != std::string::npos);
  const auto mega = launch_config("megatron", m, c, job);
  CHECK(
      mega.find("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
                "--num-distributed-optimizer-instances 8 --outer-dp-sharding-strategy no_shard") !=
      std::string::npos);
  CHECK(launch_config("accelerate", m, c, job)
            .find("# HSDP (shard over 16 data-parallel ranks, 8 "
                  "replicas) is not written here") != std::string::npos);
  // Without HSDP: FSDP over all 128, one optimizer instance.
  c.mesh.fsdp = 0;
  CHECK(launch_config("torchtitan", m, c, job)
            .find("data_parallel_replicate_degree = 1\n"
                  "data_parallel_shard_degree = 128\n") != std::string::npos);
  CHECK(launch_config("megatron", m, c, job).find("--num-distributed-optimizer-instances") ==
        std::string::npos);
}

TEST_CASE("launch lines: DeepEP and node-limited routing as Megatron-Core writes them") {
  const auto m = load_model(model_path("deepseek-v3"));
  ParallelConfig c;
  c.mesh = parse_mesh("pp=16,dp=128,ep=64", "--mesh");
  c.zero = 1;
  const LaunchJob job{4096, 15360, 1, DType::bf16, 256, 8};
  LaunchStack deepep;
  deepep.name = "megatron";
  deepep.deepep = true;
  const auto line = launch_config("megatron", m, c, job, deepep);
  CHECK(line.find(" --moe-router-num-groups 8 --moe-router-group-topk 4") != std::string::npos);
  CHECK(line.find(" --moe-token-dispatcher-type flex --moe-enable-deepep") != std::string::npos);
  // Read back: the same stack switch, and the groups agree with the model.
  const auto args = line.substr(line.find("pretrain_gpt.py ") + 16);
  const auto parsed = parse_megatron_line(args, "x");
  CHECK(parsed.ignored.empty());
  CHECK(megatron_job(parsed, 2048, m.layers, "x").stack.deepep);
  CHECK_FALSE(megatron_architecture_mismatch(parsed, m));
  // The plain dispatcher writes neither switch; a dense model no routing groups.
  CHECK(launch_config("megatron", m, c, job).find("deepep") == std::string::npos);
  CHECK(launch_config("megatron", load_model(model_path("mixtral-8x7b")), c, job, deepep)
            .find("--moe-router-num-groups") == std::string::npos);
  // Megatron-Core's later spelling of the backend.
  CHECK(megatron_job(parse_megatron_line("--expert-model-parallel-size 8 "
                                         "--moe-token-dispatcher-type flex "
                                         "--moe-flex-dispatcher-backend deepep",
                                         "x"),
                     16, 8, "x")
            .stack.deepep);
}

TEST_CASE("launch lines: CP's K/V exchange as Megatron-LM and torchtitan name it") {
  const auto m = load_model(model_path("llama3.1-70b"));
  ParallelConfig c;
  c.mesh = parse_mesh("tp=8,cp=4,dp=16", "--mesh");
  c.zero = 1;
  c.sp = true;
  const LaunchJob job{32768, 64, 1, DType::bf16, 64, 8};
  LaunchStack gather;
  gather.name = "megatron";
  gather.cp_comm = CpComm::allgather;
  LaunchStack ring = gather;
  ring.cp_comm = CpComm::ring;
  // Megatron: p2p (the ring) is its default and is not written; the all-gather is TE's name.
  const auto line = launch_config("megatron", m, c, job, gather);
  CHECK(line.find(" --cp-comm-type all_gather") != std::string::npos);
  CHECK(launch_config("megatron", m, c, job, ring).find("--cp-comm-type") == std::string::npos);
  const auto parsed = parse_megatron_line(line.substr(line.find("pretrain_gpt.py ") + 16), "x");
  CHECK(parsed.ignored.empty());
  CHECK(megatron_job(parsed, 512, m.layers, "x").stack.cp_comm == CpComm::allgather);
  // torchtitan: both methods are written when CP > 1, none without CP or without a stack's say.
  ring.name = gather.name = "torchtitan";
  CHECK(launch_config("torchtitan", m, c, job, gather)
            .find("context_parallel_rotate_method = \"allgather\"\n") != std::string::npos);
  CHECK(launch_config("torchtitan", m, c, job, ring)
            .find("context_parallel_rotate_method = \"alltoall\"\n") != std::string::npos);
  CHECK(launch_config("torchtitan", m, c, job).find("rotate_method") == std::string::npos);
  c.mesh = parse_mesh("tp=8,dp=64", "--mesh");
  CHECK(launch_config("torchtitan", m, c, job, gather).find("rotate_method") == std::string::npos);
  CHECK(launch_config("megatron", m, c, job, gather).find("--cp-comm-type") == std::string::npos);
}
