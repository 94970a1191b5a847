#!/bin/sh
# Every configuration of the Kernels table in one run (README "Kernels"), one JSON line each:
#   sh bench/moe_kernels.sh MODEL_DIR [PYTHON] [BEFORE_DIR]
# BEFORE_DIR: a built checkout of an older commit (its webgpu built-in path is measured with 4 new
# tokens, as it decodes at a few tokens/s). Batch 64, prompt 8, 32 new tokens, greedy, 2 threads.
set -e
M=$1; PY=${2:-}; BEFORE=${3:-}
export TSORCH_NUM_THREADS=2 XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg-runtime}
B="node dist/bench/moe_kernels.js --model $M --batch 64 --prompt 8"
[ -n "$BEFORE" ] && (cd "$BEFORE" && node dist/bench/moe_kernels.js --model "$M" --batch 64 --prompt 8 --device webgpu --new-tokens 4 2>/dev/null | sed 's/^{/{"build":"before",/')
$B --device webgpu 2>/dev/null
$B --device webgpu --kernels 2>/dev/null
$B --device cpu
$B --device cpu --kernels
[ -n "$PY" ] && "$PY" bench/moe_peer.py "$M" 2 64 8 32
