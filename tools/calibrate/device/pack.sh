#!/usr/bin/env bash
# Packs the calibration harness, built here, for a lent GPU machine (tools/calibrate/device/
# README.md). That machine's image has the CUDA toolkit and PyTorch but none of the Debian
# libraries meshsim builds against (Boost, fmt, nlohmann-json, CLI11, Eigen) and nothing can be
# fetched there, so `run_on_gpu.sh` (which builds on the node) cannot run on it: the harness is
# built here and carried, with the one non-CUDA library it links (fmt). cuBLAS, cuBLASLt, the CUDA
# runtime and NCCL are too large to carry (about 800 MB) and come from the machine's own CUDA 13
# (its toolkit or PyTorch's nvidia-* wheels); run.sh finds them.
# Usage: tools/calibrate/device/pack.sh [BUILD_DIR [KIT_DIR]]   (default build/release, .devkit)
set -euo pipefail
cd "$(dirname "$0")/../../.."
build="${1:-build/release}"
kit="${2:-.devkit}"
harness="$build/tools/calibrate/meshsim-calibrate"
if [[ ! -x "$harness" ]]; then
  echo "error: $harness: not built (cmake --build $build --target meshsim-calibrate; needs nvcc)" >&2
  exit 2
fi
rm -rf "$kit"
mkdir -p "$kit/lib"
cp "$harness" "$kit/"
cp tools/calibrate/device/run.sh tools/calibrate/device/profile_block.py "$kit/"
# The non-CUDA shared libraries the harness needs beyond glibc and libstdc++ (fmt, from Debian).
ldd "$harness" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libfmt.so.*) cp -L "$lib" "$kit/lib/" ;;
  esac
done
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- tools/calibrate || echo ' (tools/calibrate modified)')"
  echo "built $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  { "${CUDACXX:-/usr/local/cuda/bin/nvcc}" --version 2>/dev/null || echo "nvcc: not found"; } | tail -1
} > "$kit/MANIFEST"
echo "packed $(du -sh "$kit" | cut -f1) into $kit/ (.devkit is ignored by git: name it in the device call's carry)"
