#include "network/link_efficiency.hpp"

namespace meshsim {

double payload_efficiency(LinkKind kind) {
  switch (kind) {
    case LinkKind::nvlink:
    case LinkKind::nvlink_network:
    case LinkKind::c2c:
      return 0.8;
    case LinkKind::pcie:
    case LinkKind::cpu_interconnect:
      return 0.75;
    case LinkKind::infiniband:
    case LinkKind::ethernet:
      return 64.0 / 66.0;
  }
  return 1.0;
}

}  // namespace meshsim
