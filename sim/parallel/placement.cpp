#include "parallel/placement.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace meshsim {

std::string_view name_of(GroupKind k) {
  switch (k) {
    case GroupKind::tp:
      return "tp";
    case GroupKind::cp:
      return "cp";
    case GroupKind::dp:
      return "dp";
    case GroupKind::dp_cp:
      return "dp_cp";
    case GroupKind::ep:
      return "ep";
    case GroupKind::edp:
      return "edp";
    case GroupKind::pp:
      return "pp";
    case GroupKind::shard:
      return "shard";
    case GroupKind::replica:
      return "replica";
  }
  return "?";
}

Placement::Placement(Mesh mesh, std::array<MeshDim, 4> order) : mesh_(mesh), order_(order) {}

std::int64_t Placement::size_of(MeshDim d) const {
  switch (d) {
    case MeshDim::tp:
      return mesh_.tp;
    case MeshDim::cp:
      return mesh_.cp;
    case MeshDim::dp:
      return mesh_.dp;
    case MeshDim::pp:
      return mesh_.pp;
  }
  return 1;
}

namespace {

// The coordinate of dimension `d`, for reading or writing.
template <class Coord>
auto& coordinate(Coord& c, MeshDim d) {
  switch (d) {
    case MeshDim::tp:
      return c.tp;
    case MeshDim::cp:
      return c.cp;
    case MeshDim::dp:
      return c.dp;
    case MeshDim::pp:
      return c.pp;
  }
  return c.tp;
}

}  // namespace

std::int64_t& Placement::field(RankCoord& c, MeshDim d) const {
  return coordinate(c, d);
}

std::int64_t Placement::field(const RankCoord& c, MeshDim d) const {
  return coordinate(c, d);
}

RankCoord Placement::coord_of(std::int64_t rank) const {
  RankCoord c;
  for (MeshDim d : order_) {
    field(c, d) = rank % size_of(d);
    rank /= size_of(d);
  }
  return c;
}

std::int64_t Placement::rank_of(const RankCoord& c) const {
  std::int64_t rank = 0;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it)
    rank = rank * size_of(*it) + field(c, *it);
  return rank;
}

std::vector<std::int32_t> Placement::group(std::int64_t rank, GroupKind kind) const {
  const RankCoord c = coord_of(rank);
  std::vector<std::int32_t> out;
  auto vary = [&](MeshDim d) {
    RankCoord x = c;
    for (std::int64_t i = 0; i < size_of(d); ++i) {
      field(x, d) = i;
      out.push_back(static_cast<std::int32_t>(rank_of(x)));
    }
  };
  switch (kind) {
    case GroupKind::tp:
      vary(MeshDim::tp);
      break;
    case GroupKind::cp:
      vary(MeshDim::cp);
      break;
    case GroupKind::dp:
      vary(MeshDim::dp);
      break;
    case GroupKind::pp:
      vary(MeshDim::pp);
      break;
    case GroupKind::edp:
    case GroupKind::replica: {
      // Same position inside its block (an EP block; a shard group), across the blocks: the
      // ranks that hold the same experts, or the same shard, and reduce their gradients together.
      const std::int64_t e = c.cp + mesh_.cp * c.dp;
      const std::int64_t block = kind == GroupKind::edp ? mesh_.ep : mesh_.shard_group();
      for (std::int64_t i = e % block; i < mesh_.cp * mesh_.dp; i += block) {
        RankCoord x = c;
        x.cp = i % mesh_.cp;
        x.dp = i / mesh_.cp;
        out.push_back(static_cast<std::int32_t>(rank_of(x)));
      }
      break;
    }
    case GroupKind::dp_cp:
    case GroupKind::ep:
    case GroupKind::shard: {
      // Combined index e = cp + cp_size · dp; EP groups are blocks of ep consecutive e, shard
      // groups blocks of fsdp · cp.
      const std::int64_t e = c.cp + mesh_.cp * c.dp;
      const std::int64_t block = kind == GroupKind::ep      ? mesh_.ep
                                 : kind == GroupKind::shard ? mesh_.shard_group()
                                                            : mesh_.cp * mesh_.dp;
      const std::int64_t first = e - e % block;
      const std::int64_t count = block;
      for (std::int64_t i = first; i < first + count; ++i) {
        RankCoord x = c;
        x.cp = i % mesh_.cp;
        x.dp = i / mesh_.cp;
        out.push_back(static_cast<std::int32_t>(rank_of(x)));
      }
      break;
    }
  }
  return out;
}

std::vector<std::vector<std::int32_t>> Placement::all_groups(GroupKind kind) const {
  std::vector<std::vector<std::int32_t>> out;
  std::vector<bool> seen(static_cast<std::size_t>(world()), false);
  for (std::int64_t r = 0; r < world(); ++r) {
    if (seen[static_cast<std::size_t>(r)]) continue;
    auto g = group(r, kind);
    for (auto m : g) seen[static_cast<std::size_t>(m)] = true;
    out.push_back(std::move(g));
  }
  return out;
}

std::array<MeshDim, 4> parse_rank_order(std::string_view text, const std::string& where) {
  std::array<MeshDim, 4> out{};
  std::size_t n = 0, pos = 0;
  bool seen[4] = {false, false, false, false};
  while (pos <= text.size()) {
    const auto dash = text.find('-', pos);
    const auto item = text.substr(pos, dash == std::string_view::npos ? text.npos : dash - pos);
    MeshDim d;
    if (item == "tp")
      d = MeshDim::tp;
    else if (item == "cp")
      d = MeshDim::cp;
    else if (item == "dp")
      d = MeshDim::dp;
    else if (item == "pp")
      d = MeshDim::pp;
    else
      throw Error("", where,
                  "'" + std::string(text) +
                      "': expected the four dimensions tp, cp, dp, pp joined by '-', "
                      "innermost first");
    if (seen[static_cast<int>(d)] || n >= 4)
      throw Error("", where, "'" + std::string(text) + "': each dimension exactly once");
    seen[static_cast<int>(d)] = true;
    out[n++] = d;
    if (dash == std::string_view::npos) break;
    pos = dash + 1;
  }
  if (n != 4) throw Error("", where, "'" + std::string(text) + "': each dimension exactly once");
  return out;
}

}  // namespace meshsim
