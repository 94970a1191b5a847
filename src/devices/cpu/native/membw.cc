// Memory read bandwidth of this host as the kernels see it: a streaming read of a buffer, split
// over the thread pool (the same threads the decode kernels use). For benchmarks (npm run bench).
// The read loop is compiled for AVX-512, AVX2 and the baseline, chosen at load time: with the
// baseline's 16-byte loads the same two threads read 54 GB/s where 64-byte loads read 63-67
// (AMD EPYC Zen 5 VM, 1 GiB), so a baseline loop understated the bandwidth the kernels compete with.
// Its lines are prefetched as the decode GEMVs prefetch theirs (prefetch.h) and its buffer is split
// over the threads as theirs are: once the GEMVs prefetched one line in 32, they read 1 GiB at
// 62-64 GB/s (medians) where the read without either had a median of 50 (same host, alternating in
// one process), so it no longer bounded what they get; with both its medians are 65-73.
// The buffer is memory of the kind the weights live in (huge_pages.h: 2 MB pages where the platform
// gives them): on that host two threads read 52-53 GB/s from 4 KB pages and 68-70 from 2 MB pages,
// so a read of ordinary heap memory understated the bandwidth the decode GEMVs can get by ~25%.
// With a list of call sizes, read_bandwidth also reads the buffer in consecutive calls of those
// sizes (a decode step's GEMV calls, in order), each over the pool as one GEMV call is, alternating
// with the whole read: about what a zero-compute step of those calls can stream, beside the plain
// read.
// decode_read_bandwidth streams memory of the same kind through the decode GEMV kernels themselves
// (ops.h), so that the bench can set what they read beside the plain read.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dtype.h"
#include "huge_pages.h"
#include "ops.h"
#include "thread_pool.h"
#include "isa_clones.h"
#include "prefetch.h"

namespace tsorch {

namespace {

// The sum of n words (n a multiple of 32) in 32 lanes, four lines' worth of independent sums,
// which GCC vectorizes to the widest loads of the clone; each line prefetched as the decode GEMVs
// prefetch theirs (prefetch.h: the first line of each 2 KB block, 8 KB ahead).
TSORCH_ISA_CLONES
uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t acc[32] = {};
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) prefetch_ahead(p + i + 8 * l, kDecodePrefetchBytes);
    for (int j = 0; j < 32; ++j) acc[j] += p[i + j];
  }
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::vector<double> read_bandwidth(int64_t bytes, int reps, const std::vector<int64_t>& calls) {
  // Whole pieces of 2 KB (kPieceWords), read split as the decode GEMVs split their weights
  // (parallel_ranges: with two static halves and the prefetch the same threads read 57-58 GB/s,
  // a thread that finished early idling; with that split and no prefetch 50-51; with both 67-69).
  constexpr int64_t kPieceWords = 256;
  int64_t words = bytes / (kPieceWords * 8) * kPieceWords;
  // Each call's pieces (at least one). The calls read the buffer one after another from its start,
  // and from the start again where the next call would run past its end (the buffer holds the
  // largest call, not their sum: a step's calls add up to its weights' size).
  std::vector<int64_t> call_pieces;
  int64_t call_words = 0, largest = 0;
  for (int64_t c : calls) {
    call_pieces.push_back(std::max<int64_t>(1, c / (kPieceWords * 8)));
    call_words += call_pieces.back() * kPieceWords;
    largest = std::max(largest, call_pieces.back() * kPieceWords);
  }
  words = std::max(words, largest);
  const HugeMapping huge = map_huge(static_cast<size_t>(words) * 8);
  uint64_t* buf = huge.base ? static_cast<uint64_t*>(huge.base)
                            : static_cast<uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(words) * 8));
  if (!buf) return {};
  ThreadPool& pool = ThreadPool::get();
  const int64_t tasks = pool.size();
  // First touch from the pool's threads, so that each reads memory it placed.
  pool.parallel_for(tasks, [&](int64_t t) {
    std::memset(buf + words * t / tasks, 1, static_cast<size_t>(words * (t + 1) / tasks - words * t / tasks) * 8);
  });
  volatile uint64_t sink = 0;
  const auto read = [&](const uint64_t* p, int64_t pieces) {
    parallel_ranges(pieces, 1e9, [&](int64_t c0, int64_t c1) {
      sink = sink + sum_words(p + c0 * kPieceWords, (c1 - c0) * kPieceWords);
    });
  };
  const auto read_all = [&] { read(buf, words / kPieceWords); };
  const auto read_calls = [&] {
    int64_t at = 0;
    for (int64_t pieces : call_pieces) {
      if (at + pieces * kPieceWords > words) at = 0;
      read(buf + at, pieces);
      at += pieces * kPieceWords;
    }
  };
  const auto rate = [](int64_t bytes_read, auto&& f) {
    const double t0 = now_seconds();
    f();
    return static_cast<double>(bytes_read) / (now_seconds() - t0);
  };
  // One untimed read first: in a process holding a model, the first read of the fresh buffer ran
  // at 6-11 GB/s and the next ones at 48-64 (the paravirtualized VM measured, where mapping work
  // is done by the host), an outlier of the mapping, not of the memory.
  read_all();
  std::vector<double> whole, in_calls;
  for (int r = 0; r < reps; ++r) {
    whole.push_back(rate(words * 8, read_all));
    if (!calls.empty()) in_calls.push_back(rate(call_words * 8, read_calls));
  }
  if (huge.base) unmap_huge(huge);
  else std::free(buf);
  whole.insert(whole.end(), in_calls.begin(), in_calls.end());
  return whole;
}

std::vector<double> decode_read_bandwidth(int w_dtype, int bits, int64_t call_bytes, int64_t bytes, int reps) {
  constexpr int64_t K = 1024;
  const int64_t row_bytes = bits ? K * bits / 8 + K / 32 * 4 : K * dtype_size(w_dtype);
  const int64_t n = std::max<int64_t>(1, call_bytes / row_bytes);
  const int64_t calls = std::max<int64_t>(1, bytes / row_bytes / n), N = n * calls;
  const int64_t total = N * row_bytes;
  const HugeMapping huge = map_huge(static_cast<size_t>(total));
  uint8_t* w = huge.base ? static_cast<uint8_t*>(huge.base)
                         : static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>((total + 63) / 64 * 64)));
  if (!w) return {};
  // Arbitrary values (the kernels' work does not depend on them), first touched by the pool's
  // threads as read_bandwidth's buffer is: codes then float32 scales, or the float weight.
  const int64_t code_bytes = bits ? N * K * bits / 8 : total, nscales = bits ? N * (K / 32) : 0;
  float* scales = bits ? reinterpret_cast<float*>(w + code_bytes) : nullptr;
  ThreadPool& pool = ThreadPool::get();
  const int64_t tasks = pool.size();
  pool.parallel_for(tasks, [&](int64_t t) {
    const int64_t b0 = code_bytes * t / tasks, b1 = code_bytes * (t + 1) / tasks;
    std::memset(w + b0, bits ? 0x5a : 0x3c, static_cast<size_t>(b1 - b0));
    if (bits) std::fill(scales + nscales * t / tasks, scales + nscales * (t + 1) / tasks, 0.01f);
  });
  std::vector<float> x(K), out(static_cast<size_t>(N));
  for (int64_t k = 0; k < K; ++k) x[k] = std::sin(static_cast<float>(k));
  // Rows [r0, r1) of W into out, as one GEMV call.
  const auto gemv = [&](int64_t r0, int64_t r1) {
    if (bits)
      linear_quantized(x.data(), w + r0 * (K * bits / 8), scales + r0 * (K / 32), bits, nullptr, 0,
                       out.data() + r0, 1, r1 - r0, K);
    else
      linear(x.data(), w + r0 * row_bytes, w_dtype, nullptr, 0, out.data() + r0, 1, r1 - r0, K);
  };
  const auto one_call = [&] { gemv(0, N); };
  const auto layer_calls = [&] { for (int64_t c = 0; c < calls; ++c) gemv(c * n, (c + 1) * n); };
  const auto rate = [&](auto&& f) {
    const double t0 = now_seconds();
    f();
    return static_cast<double>(total) / (now_seconds() - t0);
  };
  one_call();
  layer_calls();
  std::vector<double> one, layered;
  for (int r = 0; r < reps; ++r) {
    one.push_back(rate(one_call));
    layered.push_back(rate(layer_calls));
  }
  if (huge.base) unmap_huge(huge);
  else std::free(w);
  one.insert(one.end(), layered.begin(), layered.end());
  one.push_back(static_cast<double>(n * row_bytes));
  return one;
}

}  // namespace tsorch
