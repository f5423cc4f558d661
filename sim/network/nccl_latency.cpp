#include "network/nccl_latency.hpp"

namespace meshsim {

double nccl_base_latency_us(CollectiveAlgo algo, Protocol p) {
  const bool tree = algo == CollectiveAlgo::tree;
  switch (p) {
    case Protocol::ll:
      return tree ? 6.8 : 6.6;
    case Protocol::ll128:
      return 14.0;
    case Protocol::simple:
      return 8.4;
  }
  return 0.0;
}

double nccl_hop_latency_us(CollectiveAlgo algo, Protocol p, HopClass hop) {
  const int i = static_cast<int>(p);  // LL, LL128, Simple
  if (algo == CollectiveAlgo::nvls) return 25.0;
  static constexpr double kNvlink[] = {0.6, 1.9, 3.4};
  static constexpr double kPcie[] = {1.0, 2.5, 5.7};
  static constexpr double kNetRing[] = {2.7, 4.0, 14.0};
  static constexpr double kNetTree[] = {5.0, 8.5, 14.0};
  switch (hop) {
    case HopClass::nvlink:
      return kNvlink[i];
    case HopClass::pcie:
      return kPcie[i];
    case HopClass::network:
      return algo == CollectiveAlgo::tree ? kNetTree[i] : kNetRing[i];
  }
  return 0.0;
}

double protocol_efficiency(CollectiveAlgo algo, Protocol p) {
  double e = p == Protocol::ll ? 0.5 : p == Protocol::ll128 ? 0.92 : 1.0;
  if (algo == CollectiveAlgo::tree) e *= 0.92;
  if (algo == CollectiveAlgo::nvls) e *= 0.85;
  return e;
}

}  // namespace meshsim
