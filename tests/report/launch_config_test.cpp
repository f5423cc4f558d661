#include "report/launch_config.hpp"

#include <doctest/doctest.h>

#include "model/model_loader.hpp"
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
