#pragma once
// The parallel mesh DP × TP × PP × CP, with expert parallelism folded into DP × CP as
// Megatron-Core does (an EP group is carved out of the data- and context-parallel ranks, so EP
// does not add GPUs: world = dp·tp·pp·cp).
#include <cstdint>
#include <string>
#include <string_view>

namespace meshsim {

struct Mesh {
  std::int64_t dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;

  std::int64_t world() const { return dp * tp * pp * cp; }
  // Ranks that hold the same dense weights: data- and context-parallel ranks (Megatron shards
  // its distributed optimizer over both).
  std::int64_t dense_replicas() const { return dp * cp; }
  // Ranks that hold the same expert weights: the DP × CP ranks divided among EP groups.
  std::int64_t expert_replicas() const { return dp * cp / ep; }
  bool operator==(const Mesh&) const = default;
};

// "dp=64,tp=8,pp=4" (any order; absent degrees are 1). Errors name `where` (a flag or file path).
Mesh parse_mesh(std::string_view text, const std::string& where);
std::string to_string(const Mesh& m);  // "dp=64 tp=8 pp=4 cp=1 ep=1"

}  // namespace meshsim
