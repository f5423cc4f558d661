#pragma once
// Ranks of a mesh, their coordinates, their process groups and the GPUs they run on.
//
// Rank order (innermost first) defaults to Megatron-LM's: TP, CP, DP, PP — so a TP group is
// tp consecutive ranks and stays inside a node when tp divides the GPUs per node. Expert
// parallelism is folded into DP × CP (Megatron-Core): an EP group is ep consecutive members of
// the combined (CP, DP) index, so it adds no ranks. Ranks map to GPUs in topology order.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/mesh.hpp"

namespace meshsim {

enum class MeshDim : std::uint8_t { tp, cp, dp, pp };

struct RankCoord {
  std::int64_t tp = 0, cp = 0, dp = 0, pp = 0;
  bool operator==(const RankCoord&) const = default;
};

// The groups a rank communicates in.
// dp_cp: the DP × CP ranks that reduce dense gradients; edp: the ranks that hold the same
// experts (expert data parallelism, dp·cp/ep of them).
// shard / replica (HSDP, Mesh::fsdp): the dp_cp ranks a dense ZeRO/FSDP shard is spread over
// (blocks of fsdp · cp consecutive combined indices), and the ranks holding the same shard
// (the same position in every block).
enum class GroupKind : std::uint8_t { tp, cp, dp, dp_cp, ep, edp, pp, shard, replica };
std::string_view name_of(GroupKind k);

class Placement {
 public:
  // `order`: the four dimensions innermost first (default tp, cp, dp, pp).
  explicit Placement(Mesh mesh, std::array<MeshDim, 4> order = {MeshDim::tp, MeshDim::cp,
                                                                MeshDim::dp, MeshDim::pp});

  const Mesh& mesh() const { return mesh_; }
  const std::array<MeshDim, 4>& order() const { return order_; }
  std::int64_t world() const { return mesh_.world(); }
  RankCoord coord_of(std::int64_t rank) const;
  std::int64_t rank_of(const RankCoord& c) const;
  std::int32_t gpu_of(std::int64_t rank) const { return static_cast<std::int32_t>(rank); }

  // Members of `rank`'s group of `kind`, in group order (the rank's own position included).
  // pp: the rank's whole pipeline (stages 0..pp-1).
  std::vector<std::int32_t> group(std::int64_t rank, GroupKind kind) const;
  // Every group of `kind`, each once, ordered by its first member.
  std::vector<std::vector<std::int32_t>> all_groups(GroupKind kind) const;

 private:
  std::int64_t size_of(MeshDim d) const;
  std::int64_t& field(RankCoord& c, MeshDim d) const;
  std::int64_t field(const RankCoord& c, MeshDim d) const;

  Mesh mesh_;
  std::array<MeshDim, 4> order_;
};

// "tp-cp-dp-pp" (innermost first, each once). Errors name `where`.
std::array<MeshDim, 4> parse_rank_order(std::string_view text, const std::string& where);

}  // namespace meshsim
