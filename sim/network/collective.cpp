#include "network/collective.hpp"

#include "core/enum_names.hpp"

namespace meshsim {

std::string_view name_of(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::all_gather:
      return "all_gather";
    case CollectiveOp::reduce_scatter:
      return "reduce_scatter";
    case CollectiveOp::all_to_all:
      return "all_to_all";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::reduce:
      return "reduce";
    case CollectiveOp::send_recv:
      return "send_recv";
  }
  return "?";
}

std::string_view name_of(CollectiveAlgo a) {
  switch (a) {
    case CollectiveAlgo::ring:
      return "ring";
    case CollectiveAlgo::tree:
      return "tree";
    case CollectiveAlgo::nvls:
      return "nvls";
    case CollectiveAlgo::hierarchical:
      return "hier";
    case CollectiveAlgo::direct:
      return "direct";
  }
  return "?";
}

std::string_view name_of(Protocol p) {
  switch (p) {
    case Protocol::ll:
      return "LL";
    case Protocol::ll128:
      return "LL128";
    case Protocol::simple:
      return "Simple";
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective_op(std::string_view s) {
  return parse_by_name<CollectiveOp>(kAllCollectiveOps, s);
}

std::optional<CollectiveAlgo> parse_collective_algo(std::string_view s) {
  return parse_by_name<CollectiveAlgo>(kAllCollectiveAlgos, s);
}

double busbw_factor(CollectiveOp op, std::size_t ranks) {
  const double n = static_cast<double>(ranks);
  if (ranks < 2) return 0.0;  // a one-rank group moves nothing
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return (n - 1) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
    case CollectiveOp::send_recv:
      return 1.0;
  }
  return 1.0;
}

}  // namespace meshsim
