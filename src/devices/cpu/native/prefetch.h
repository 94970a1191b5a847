// How far ahead of the line being read the kernels that stream one row of W at a time (the decode
// GEMVs: q4_0 / q8_0 rows for 1-3 activation rows, q4_0 on the 32-byte paths for any, the float
// GEMV's one-row blocks) prefetch each weight row, and prefetch_ahead, which they call.
//
// A decode GEMV reads its weight once, front to back, from DRAM. The hardware prefetchers alone
// kept the one-activation-row kernels well under a plain streaming read of the same bytes (the
// kernels do more work per line than a plain read, so fewer lines are in flight), and a prefetch
// kDecodePrefetchBytes ahead on every 64-byte line closes most of that gap.
// Measured on AMD EPYC Zen 5 (2 threads, 2 MB pages), Qwen3-0.6B-shaped batch-1 eager decode in
// one process, the variants alternating (ms per token, medians of 5-7): int8 20.96 -> 16.24,
// int4 10.71 -> 9.94, bfloat16 24.31 -> 22.96; distances 1, 2, 4, 8 KB: int8 17.62 / 16.43 /
// 15.10 / 16.36, bfloat16 26.65 / 25.91 / 24.99 / 26.65.
//
// The prefetch is non-temporal (prefetchnta): the weight is read once per step, and everything
// else a step touches (activations, the KV cache, code, the graph's arguments) should outlive it
// in the caches. Same host, the recorded decode-token kernel calls replayed with the two builds
// alternating in one process (ms per token, medians of 40): int8 17.76 -> 16.23 and 11.91 ->
// 10.94, bfloat16 27.49 -> 26.25 and 18.73 -> 18.28, int4 9.70 -> 9.48 and 6.98 -> 7.07 (the
// pairs from two bandwidth spells of the VM); prefetcht1 (into L2) instead measured 1-3% slower than
// non-temporal, and the distances 2 and 8 KB no faster than 4.
#pragma once

#include <cstdint>

namespace tsorch {

constexpr int64_t kDecodePrefetchBytes = 4096;

// Prefetch (for reading, non-temporal: see above) the line `bytes` after p. Integer arithmetic: the
// address may lie past the end of the buffer, which a prefetch tolerates (it never faults).
inline void prefetch_ahead(const void* p, int64_t bytes) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)), 0, 0);
}

}  // namespace tsorch
