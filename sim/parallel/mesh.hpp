#pragma once
// The parallel mesh DP × TP × PP × CP, with expert parallelism folded into DP × CP as
// Megatron-Core does (an EP group is carved out of the data- and context-parallel ranks, so EP
// does not add GPUs: world = dp·tp·pp·cp).
#include <cstdint>
#include <string>
#include <string_view>

namespace meshsim {

// HSDP (torchtitan's data_parallel_shard_degree < the data-parallel degree; Megatron-Core's
// --num-distributed-optimizer-instances > 1): ZeRO/FSDP state is sharded over `fsdp` of the dp
// ranks (× cp, which both shard over too) and replicated across the dp / fsdp such groups.
// fsdp = 0: shard over all of them (plain ZeRO/FSDP).
struct Mesh {
  std::int64_t dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  std::int64_t fsdp = 0;

  std::int64_t world() const { return dp * tp * pp * cp; }
  // Ranks that hold the same dense weights: data- and context-parallel ranks (Megatron shards
  // its distributed optimizer over both).
  std::int64_t dense_replicas() const { return dp * cp; }
  // Ranks that hold the same expert weights: the DP × CP ranks divided among EP groups.
  std::int64_t expert_replicas() const { return dp * cp / ep; }
  // Ranks a dense ZeRO/FSDP shard is spread over, and how many copies of each shard there are.
  std::int64_t shard_group() const { return (fsdp > 0 ? fsdp : dp) * cp; }
  std::int64_t shard_replicas() const { return dense_replicas() / shard_group(); }
  bool operator==(const Mesh&) const = default;
};

// "dp=64,tp=8,pp=4" (any order; absent degrees are 1); "dp=64,fsdp=8": HSDP, shards over 8 of
// the 64 data-parallel ranks. Without dp and with `world` > 0 GPUs, dp is what fills them:
// world / (tp·pp·cp), an error unless it divides. Errors name `where` (a flag or file path).
Mesh parse_mesh(std::string_view text, const std::string& where, std::int64_t world = 0);
std::string to_string(const Mesh& m);  // "dp=64 tp=8 pp=4 cp=1 ep=1" (+ " fsdp=8" with HSDP)

}  // namespace meshsim
