// How far ahead of the line being read the batch-1 decode GEMV kernels prefetch each weight row.
//
// A decode GEMV reads its weight once, front to back, from DRAM. The hardware prefetchers alone
// kept the one-activation-row kernels well under a plain streaming read of the same bytes (the
// kernels do more work per line than a plain read, so fewer lines are in flight), and
// __builtin_prefetch(p + kDecodePrefetchBytes) on every 64-byte line closes most of that gap.
// Measured on AMD EPYC Zen 5 (2 threads, 2 MB pages), Qwen3-0.6B-shaped batch-1 eager decode in
// one process, the variants alternating (ms per token, medians of 5-7): int8 20.96 -> 16.24,
// int4 10.71 -> 9.94, bfloat16 24.31 -> 22.96; distances 1, 2, 4, 8 KB: int8 17.62 / 16.43 /
// 15.10 / 16.36, bfloat16 26.65 / 25.91 / 24.99 / 26.65.
#pragma once

#include <cstdint>

namespace tsorch {

constexpr int64_t kDecodePrefetchBytes = 4096;

}  // namespace tsorch
