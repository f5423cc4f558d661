#pragma once
// Collective operations, the algorithms that implement them and NCCL's wire protocols.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace meshsim {

enum class CollectiveOp : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  broadcast,
  reduce,
  send_recv
};
enum class CollectiveAlgo : std::uint8_t { ring, tree, nvls, hierarchical, direct };
enum class Protocol : std::uint8_t { ll, ll128, simple };

std::string_view name_of(CollectiveOp op);
std::string_view name_of(CollectiveAlgo a);
std::string_view name_of(Protocol p);
std::optional<CollectiveOp> parse_collective_op(std::string_view s);
std::optional<CollectiveAlgo> parse_collective_algo(std::string_view s);

inline constexpr CollectiveOp kAllCollectiveOps[] = {
    CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
    CollectiveOp::all_to_all, CollectiveOp::broadcast,  CollectiveOp::reduce,
    CollectiveOp::send_recv};
inline constexpr CollectiveAlgo kAllCollectiveAlgos[] = {
    CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls, CollectiveAlgo::hierarchical,
    CollectiveAlgo::direct};
inline constexpr Protocol kAllProtocols[] = {Protocol::ll, Protocol::ll128, Protocol::simple};

// nccl-tests' busbw factor (NVIDIA/nccl-tests doc/PERFORMANCE.md; validation/collectives.md B1):
// all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast, reduce,
// send/recv 1.
double busbw_factor(CollectiveOp op, std::size_t ranks);

// What one collective call is: the op, its ranks (global GPU indices, in group order), and the
// message size S in bytes as nccl-tests defines it (the whole buffer; for all-gather and
// reduce-scatter the per-rank count × n).
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::vector<std::int32_t> ranks;
  double bytes = 0;
  // all_to_all by a dispatcher that sends a token to each node once (DeepEP's internode
  // kernels): the bytes each rank sends to another node as a fraction of a plain all-to-all's
  // (model/moe_routing.hpp, dedup_network_share). 1: a plain all-to-all. Below 1 only the
  // hierarchical algorithm applies.
  double network_share = 1.0;
};

}  // namespace meshsim
