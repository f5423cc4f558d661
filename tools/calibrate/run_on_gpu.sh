#!/usr/bin/env bash
# One prepared run on a GPU node: build the harness, measure everything this node allows, fit
# the profile. Usage: tools/calibrate/run_on_gpu.sh OUT_DIR [PROFILE_NAME]
#   OUT_DIR/raw.json       what the harness measured (with the environment and notes)
#   OUT_DIR/profile.json   meshsim calibrate fit's profile (copy it to topologies/calibration/)
#   OUT_DIR/node.json      the node's topology from NVML, when NVML is there
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?OUT_DIR}"
mkdir -p "$out"
cmake --preset cuda >/dev/null
cmake --build build/cuda -j "$(nproc)" --target meshsim-calibrate meshsim
h=build/cuda/tools/calibrate/meshsim-calibrate
# Fast sections first, so a time limit still leaves something to fit.
for s in launch membw gemm interference attention p2p nccl topo; do
  timeout 240 "$h" --out "$out/raw.json" "$s" || echo "section $s: exit $?" >&2
done
build/cuda/tools/meshsim/meshsim calibrate fit --raw "$out/raw.json" --out "$out/profile.json" \
  --topology-out "$out/node.json" || \
  build/cuda/tools/meshsim/meshsim calibrate fit --raw "$out/raw.json" --out "$out/profile.json"
