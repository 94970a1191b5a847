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
// (ops.h), so that the bench can set what they read beside the plain read; decode_compute_rate runs
// the same kernels over a weight small enough to stay in each thread's caches: how fast they go
// where memory is not what holds them back.
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
#include "quant_kernels.h"

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

namespace {

// A decode GEMV's weight for the kernel probes below: rows of K = 1024 (int8 / int4 codes, then
// their float32 block scales; or a float weight of w_dtype), in memory of the kind a model's
// weights get (map_huge), first touched by the pool's threads as read_bandwidth's buffer is, with
// arbitrary values (the kernels' work does not depend on them). gemv(r0, r1) runs rows [r0, r1) as
// one call of the batch-1 decode kernel: linear_quantized (bits 8 / 4) or linear (bits 0). For
// block-quantized weights, kernel() instead quantizes the activation row once (on the calling
// thread; the portable kernels take it as float32) and returns the GEMV kernel alone over rows
// [r0, r1) (quant_rows, as a decode step's grouped linears call it), without linear_quantized's
// quantization of the activation per call.
class ProbeWeight {
 public:
  static constexpr int64_t K = 1024;
  // Bytes of one row of W: codes and scales, or float values.
  static int64_t row_bytes(int w_dtype, int bits) {
    return bits ? quant_row_bytes(bits, K) + K / 32 * 4 : K * dtype_size(w_dtype);
  }

  ProbeWeight(int w_dtype, int bits, int64_t rows)
      : w_dtype_(w_dtype), bits_(bits), N_(rows), row_bytes_(row_bytes(w_dtype, bits)), x_(K),
        out_(static_cast<size_t>(rows)) {
    const int64_t total = N_ * row_bytes_;
    huge_ = map_huge(static_cast<size_t>(total));
    w_ = huge_.base ? static_cast<uint8_t*>(huge_.base)
                    : static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>((total + 63) / 64 * 64)));
    if (!w_) return;
    const int64_t code_bytes = bits ? N_ * quant_row_bytes(bits, K) : total, nscales = bits ? N_ * (K / 32) : 0;
    scales_ = bits ? reinterpret_cast<float*>(w_ + code_bytes) : nullptr;
    ThreadPool& pool = ThreadPool::get();
    const int64_t tasks = pool.size();
    pool.parallel_for(tasks, [&](int64_t t) {
      const int64_t b0 = code_bytes * t / tasks, b1 = code_bytes * (t + 1) / tasks;
      std::memset(w_ + b0, bits ? 0x5a : 0x3c, static_cast<size_t>(b1 - b0));
      if (bits) std::fill(scales_ + nscales * t / tasks, scales_ + nscales * (t + 1) / tasks, 0.01f);
    });
    for (int64_t k = 0; k < K; ++k) x_[k] = std::sin(static_cast<float>(k));
  }
  ~ProbeWeight() {
    if (huge_.base) unmap_huge(huge_);
    else std::free(w_);
  }
  ProbeWeight(const ProbeWeight&) = delete;
  ProbeWeight& operator=(const ProbeWeight&) = delete;

  bool ok() const { return w_ != nullptr; }
  int64_t rows() const { return N_; }
  void gemv(int64_t r0, int64_t r1) {
    if (bits_)
      linear_quantized(x_.data(), w_ + r0 * quant_row_bytes(bits_, K), scales_ + r0 * (K / 32), bits_, nullptr, 0,
                       out_.data() + r0, 1, r1 - r0, K);
    else
      linear(x_.data(), w_ + r0 * row_bytes_, w_dtype_, nullptr, 0, out_.data() + r0, 1, r1 - r0, K);
  }
  // The decode kernel alone, as f(r0, r1): for bits 8 / 4 the activation is quantized here, once,
  // into the calling thread's scratch (so call f on that thread); float weights run gemv.
  auto kernel() {
    QuantRows rows;
    const bool prepared = bits_ && quant_rows_prepare(x_.data(), bits_, 1, K, &rows);
    return [this, rows, prepared](int64_t r0, int64_t r1) {
      if (prepared) quant_rows(rows, w_ + r0 * quant_row_bytes(bits_, K), scales_ + r0 * (K / 32), nullptr, out_.data() + r0, r1 - r0, 0, r1 - r0);
      else gemv(r0, r1);
    };
  }

 private:
  int w_dtype_, bits_;
  int64_t N_, row_bytes_;
  HugeMapping huge_;
  uint8_t* w_ = nullptr;
  float* scales_ = nullptr;
  std::vector<float> x_, out_;
};

}  // namespace

std::vector<double> decode_read_bandwidth(int w_dtype, int bits, int64_t call_bytes, int64_t bytes, int reps) {
  const int64_t row_bytes = ProbeWeight::row_bytes(w_dtype, bits);
  const int64_t n = std::max<int64_t>(1, call_bytes / row_bytes);
  const int64_t calls = std::max<int64_t>(1, bytes / row_bytes / n);
  ProbeWeight w(w_dtype, bits, n * calls);
  if (!w.ok()) return {};
  const double total = static_cast<double>(w.rows() * row_bytes);
  const auto one_call = [&] { w.gemv(0, w.rows()); };
  const auto layer_calls = [&] { for (int64_t c = 0; c < calls; ++c) w.gemv(c * n, (c + 1) * n); };
  const auto rate = [&](auto&& f) {
    const double t0 = now_seconds();
    f();
    return total / (now_seconds() - t0);
  };
  one_call();
  layer_calls();
  std::vector<double> one, layered;
  for (int r = 0; r < reps; ++r) {
    one.push_back(rate(one_call));
    layered.push_back(rate(layer_calls));
  }
  one.insert(one.end(), layered.begin(), layered.end());
  one.push_back(static_cast<double>(n * row_bytes));
  return one;
}

std::vector<double> decode_compute_rate(int w_dtype, int bits, int64_t bytes, int reps) {
  ThreadPool& pool = ThreadPool::get();
  const int64_t T = pool.size();
  const int64_t row_bytes = ProbeWeight::row_bytes(w_dtype, bits);
  const int64_t n = std::max<int64_t>(1, bytes / row_bytes);  // rows per thread
  ProbeWeight w(w_dtype, bits, n * T);
  if (!w.ok()) return {};
  // Calls per task and rep: ~256 MiB of its weight read again and again (a few ms on the hosts
  // measured), at most 65536 calls (a weight of a few rows).
  const int64_t iters = std::clamp<int64_t>((int64_t{1} << 28) / (n * row_bytes), 1, 65536);
  // Task t calls the kernel on its own rows from inside the pool task, where a kernel's own split
  // runs inline (no nested parallelism): one task per pool thread, each thread normally taking one
  // (a thread that finds a task unclaimed runs it too), every thread one GEMV at a time, all at once.
  // The activation is quantized once per task (ProbeWeight::kernel): through session 24 each call
  // quantized it again, one quantization per ~256 KiB of weight where a decode step has one per
  // 1-7 MB call, which held the rates to 0.76-0.84 of the kernels' own in int4 and 0.89-0.95 in
  // int8 (processes alternating, AMD EPYC Zen 5, 2 threads).
  const auto pass = [&](int64_t k) {
    pool.parallel_for(T, [&](int64_t t) {
      const auto kernel = w.kernel();
      for (int64_t i = 0; i < k; ++i) kernel(t * n, (t + 1) * n);
    });
  };
  pass(2);  // each thread's rows into its caches
  std::vector<double> r;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = now_seconds();
    pass(iters);
    r.push_back(static_cast<double>(T * iters * n * row_bytes) / (now_seconds() - t0));
  }
  r.push_back(static_cast<double>(n * row_bytes));
  return r;
}

}  // namespace tsorch
