#!/usr/bin/env bash
# `npm run test:sanitize`: the cpu device's addon built with AddressSanitizer and
# UndefinedBehaviorSanitizer (binding.gyp with TSORCH_SANITIZE=1), in build-sanitize/ so that the
# normal build/ is untouched, then the conformance suite on cpu and the safetensors tests
# (test/hub_safetensors*.test.js) against it. The first sanitizer report aborts with a non-zero exit.
# Linux with g++ (GCC's libasan/libubsan); Node is not built with ASan, so libasan is preloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

# node-gyp builds into ./build beside binding.gyp: give the sanitizer build a folder of its own.
# cp -p keeps modification times, so make recompiles only what changed since the last run.
out=build-sanitize
mkdir -p "$out/src/devices/cpu"
cp -p binding.gyp "$out/"
cp -rp src/devices/cpu/native "$out/src/devices/cpu/"
(cd "$out" && export TSORCH_SANITIZE=1 && node-gyp configure --loglevel=warn && node-gyp build --jobs=max --loglevel=warn >/dev/null)
addon="$PWD/$out/build/Release/tsorch_cpu.node"
ldd "$addon" | grep libasan >/dev/null || { echo "test:sanitize: $addon is not linked with libasan" >&2; exit 1; }

export TSORCH_CPU_ADDON="$addon"
export LD_PRELOAD="$(${CXX:-g++} -print-file-name=libasan.so)"
# Node's own allocations are never freed at exit: leak reports would be noise.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

node dist/src/cli/main.js conformance --device cpu | tail -n 3
echo "test:sanitize: conformance on cpu passed under ASan + UBSan"
# The lower integer paths of quantized linears and the float32 path of bfloat16 linears.
for p in avx-vnni avx2 portable off; do
  TSORCH_CPU_INT8=$p node dist/src/cli/main.js conformance --device cpu --op linearQuantized | tail -n 1
done
TSORCH_CPU_BF16=f32 node dist/src/cli/main.js conformance --device cpu --op linear | tail -n 1
node --test --test-concurrency=1 dist/test/hub_safetensors*.test.js
