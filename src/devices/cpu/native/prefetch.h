// How the kernels that stream one row of W at a time (the decode GEMVs: q4_0 / q8_0 rows for 1-3
// activation rows, q4_0 on the 32-byte paths for any, the float GEMV's one-row blocks) prefetch
// their weight: prefetch_ahead, called for each 64-byte line of a row's main loop, prefetches the
// line kDecodePrefetchBytes ahead when it begins a kDecodePrefetchStride block, one line in 32.
//
// A decode GEMV reads its weight once, front to back, from DRAM. The hardware prefetchers follow
// such a stream but stop at 4 KB page ends (also within 2 MB pages), and with no software prefetch
// at all the kernels stayed well under a plain streaming read of the same bytes (eager int8 decode
// 20.96 ms a token against 16.24 with a prefetch on every line, AMD EPYC Zen 5, 2 threads). The one
// prefetch a 2 KB block, 8 KB ahead, starts each page's misses before the stream gets there, and
// the hardware prefetchers then fetch the rest; a prefetch on every line (sessions 13-17: 4 KB
// ahead) took load slots and miss buffers from them. Same host, builds alternating in one process:
// one 1 GiB GEMV call 45.1 -> 68.5 GB/s in int4, 52.4 -> 65.2 int8, 57.9 -> 66.7 bfloat16 (calls
// of 1.4 / 2.5 / 4.5 MB: 1.32x, 1.19x, 1.10x), the compiled Qwen3-0.6B-shaped decode step 0.82-0.90
// of the time in int4, 0.82-0.84 int8, 0.84-0.89 bfloat16. Against 8 KB ahead a 2 KB block: 4 KB
// ahead 1.03-1.05x the time, 16 KB ahead 0.97-1.01x, 32 KB ahead a 4 KB block 1.01-1.05x (noise);
// a 1 KB block 1.07-1.10x.
//
// The kernels call it in their main loop over a row, not for the few lines of a row's tail (K not
// a multiple of the loop's step: 128 values for the float GEMV at one row); a block whose first
// line falls in a tail is then left to the hardware prefetchers (K = 1024, 3072 leave none).
//
// The prefetch is non-temporal (prefetchnta): the weight is read once per step, and everything
// else a step touches (activations, the KV cache, code, the graph's arguments) should outlive it
// in the caches (with a prefetch on every line, prefetcht1 measured 1-3% slower).
#pragma once

#include <cstdint>

namespace tsorch {

constexpr int64_t kDecodePrefetchBytes = 8192;
constexpr uintptr_t kDecodePrefetchStride = 2048;

// Prefetch (for reading, non-temporal: see above) the line `bytes` after p if it is the first line
// of a kDecodePrefetchStride-aligned block, so that a kernel calling this for each line it reads
// prefetches one line in 32. Integer arithmetic: the address may lie past the end of the buffer,
// which a prefetch tolerates (it never faults).
inline void prefetch_ahead(const void* p, int64_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes);
  if ((a & (kDecodePrefetchStride - 1)) < 64) __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 0);
}

}  // namespace tsorch
