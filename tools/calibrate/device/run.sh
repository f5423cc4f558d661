#!/usr/bin/env bash
# Runs on a lent GPU machine, from the kit pack.sh made (.devkit/, carried with the working tree):
# the harness's sections and PyTorch profiler traces of Llama blocks, in order of what the open
# issues need most, each under a time cap and all under one budget, so a machine that is taken back
# or a command that hits its limit still returns what ran first. Everything lands in OUT_DIR:
#   raw.json                 the harness's raw JSON (meshsim calibrate fit --raw)
#   kineto-eager.json.gz     profiler trace of eager training steps (meshsim calibrate kineto)
#   kineto-compile.json.gz   the same with torch.compile per block
#   block-model.json         the blocks' model as a Hugging Face config (--workload for kineto)
#   run.log                  what ran, how long, and why a step was skipped
# Usage: .devkit/run.sh OUT_DIR [BUDGET_S]   (default 500 s)
set -uo pipefail
kit="$(cd "$(dirname "$0")" && pwd)"
out="${1:?OUT_DIR}"
budget="${2:-500}"
mkdir -p "$out"
log="$out/run.log"
start=$(date +%s)
say() { echo "[$(($(date +%s) - start)) s] $*" | tee -a "$log"; }
say "kit: $(tr '\n' ';' < "$kit/MANIFEST")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader \
  >> "$log" 2>&1 || true

# The CUDA 13 libraries the harness links, wherever this image keeps them (the toolkit's lib64,
# PyTorch's nvidia-* wheels): their folders go on the loader's path, the kit's own lib/ first.
libdirs=$(find /usr/local /usr/lib /opt -xdev \( -name 'libcublasLt.so.13' -o -name 'libcublas.so.13' \
            -o -name 'libcudart.so.13' -o -name 'libnccl.so.2' \) -printf '%h\n' 2>/dev/null | sort -u)
export LD_LIBRARY_PATH="$kit/lib:$(echo $libdirs | tr ' ' ':')${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "library folders: $(echo $libdirs)"
if ldd "$kit/meshsim-calibrate" | grep -q 'not found'; then
  ldd "$kit/meshsim-calibrate" | grep 'not found' | tee -a "$log"
  say "the harness cannot load; only the PyTorch steps run"
  harness=""
else
  harness="$kit/meshsim-calibrate"
fi

# step NAME CAP_S COMMAND...: runs COMMAND under min(CAP_S, what the budget leaves less 15 s).
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - ($(date +%s) - start) - 15))
  if ((left < 20)); then say "$name: skipped, ${left} s of the budget left"; return; fi
  local t=$((cap < left ? cap : left))
  say "$name: start (limit $t s)"
  timeout "$t" "$@" >> "$log" 2>&1
  say "$name: exit $?"
}
section() { [[ -n "$harness" ]] && step "harness $1" "$2" "$harness" --out "$out/raw.json" "$1"; }
profile() {
  step "profile $1" "$2" python3 "$kit/profile_block.py" --mode "$1" --out "$out"
}

# Most needed first: the host's time per kernel of an eager step (issue 15's missing number),
# the stream's gap per kernel, the GEMM sweep (issue 14's H100 check), the GEMM beside held SMs.
profile eager 90
section launch 45
section gemm 150
section interference 60
profile compile 150
section membw 40
section attention 60
section topo 20
section p2p 20
section nccl 30
say "done"
ls -la "$out" >> "$log"
