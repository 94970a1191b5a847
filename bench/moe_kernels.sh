#!/bin/sh
# Every configuration of the Kernels table in one run (README "Kernels"), one JSON line each:
#   sh bench/moe_kernels.sh MODEL_DIR [PYTHON] [BEFORE_DIR]
# BEFORE_DIR: a checkout of an older commit with node_modules and the native addon (build/), e.g.
#   git worktree add --detach /tmp/wt-before ab4dd63 && ln -s "$PWD/node_modules" /tmp/wt-before/ && cp -r build /tmp/wt-before/
# this script copies bench/moe_kernels.ts into it and compiles it; its webgpu built-in path is then
# measured on the same workload, decoding until a step ends past 420 s (the per-expert path of
# ab4dd63 prefills for 20+ minutes and decodes a step in minutes on a loaded 2-core host).
# Batch 64, prompt 8, 32 new tokens, greedy, 2 threads.
set -e
M=$1; PY=${2:-}; BEFORE=${3:-}
export TSORCH_NUM_THREADS=2 XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg-runtime}
B="node dist/bench/moe_kernels.js --model $M --batch 64 --prompt 8"
if [ -n "$BEFORE" ]; then
  cp bench/moe_kernels.ts "$BEFORE/bench/" && (cd "$BEFORE" && npx tsc -p . >/dev/null || true)
  (cd "$BEFORE" && node dist/bench/moe_kernels.js --model "$M" --batch 64 --prompt 8 --device webgpu --max-decode-s 420 2>/dev/null | sed 's/^{/{"build":"before",/')
fi
$B --device webgpu 2>/dev/null
$B --device webgpu --kernels 2>/dev/null
$B --device cpu
$B --device cpu --kernels
[ -n "$PY" ] && "$PY" bench/moe_peer.py "$M" 2 64 8 32
