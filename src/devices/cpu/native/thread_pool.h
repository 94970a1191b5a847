// The addon's persistent thread pool: the calling (JS) thread plus size()-1 workers that spin
// briefly between jobs and then sleep on a condition variable. The caller runs tasks too.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace tsorch {

class ThreadPool {
 public:
  // The process-wide pool, created on first use with TSORCH_NUM_THREADS threads (else the number
  // of CPUs this process may run on). It is never destroyed: its workers must outlive every Node
  // environment, and a job waits for every worker, so a descheduled worker delays it.
  static ThreadPool& get();

  int size() const { return nthreads_; }

  // Runs fn(ctx, i) for every i in [0, ntasks), spread over the pool (dynamic: each thread takes
  // the next index, the calling thread included, which runs index 0 first), and returns when all
  // are done, without waiting for workers that did not take part. Runs inline when the pool has
  // one thread, when there is one task, or when called from inside a pool task (no nested
  // parallelism).
  void run(int64_t ntasks, void (*fn)(void* ctx, int64_t i), void* ctx);

  // Typed convenience wrapper: f(i) for i in [0, ntasks).
  template <class F>
  void parallel_for(int64_t ntasks, F&& f) {
    using Fn = std::remove_reference_t<F>;
    run(ntasks, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  explicit ThreadPool(int nthreads);
  void worker_loop();
  void work(uint64_t job);

  struct State;
  State* s_;
  int nthreads_;
};

// How many tasks to split a job of `work` (about flops or bytes touched) into: 1 when it is too
// small to be worth waking the pool (under ~32K), else max_tasks (at least 1).
int64_t split_count(double work, int64_t max_tasks);

// Runs row_fn(r) for every r < rows, in contiguous chunks spread over the pool when
// rows * cost_per_row (flops or bytes, roughly) is worth it.
template <class F>
void parallel_rows(int64_t rows, double cost_per_row, F&& row_fn) {
  if (rows <= 0) return;
  ThreadPool& pool = ThreadPool::get();
  int64_t tasks = split_count(cost_per_row * static_cast<double>(rows), 4 * pool.size());
  if (tasks > rows) tasks = rows;
  pool.parallel_for(tasks, [&](int64_t t) {
    for (int64_t r = rows * t / tasks, r1 = rows * (t + 1) / tasks; r < r1; ++r) row_fn(r);
  });
}


// Runs fn(c0, c1) over pieces [c0, c1) covering [0, nchunks) exactly once, in parallel when
// nchunks * cost_per_chunk is worth it. Each pool thread owns one contiguous range, which it
// streams front to back as a single thread would (one hardware-prefetch stream, no jumps between
// interleaved tasks); a thread that finishes its own range takes pieces from the back of the
// others' ranges, so that on a loaded machine a descheduled thread holds up no more than a piece.
// Batch-1 decode GEMVs stream every weight byte once; on the host measured (AMD EPYC Zen 5, 2
// threads, Qwen3-0.6B-shaped int4/int8 layer GEMVs, same-process A/B at load ~2.7) this split read
// 0-10% faster than 4 tasks per thread claimed round-robin. A piece is a quarter of what its range
// has left, at most 1/8 of the range (what a descheduled thread can hold up) and at least 1/256:
// the pieces shrink towards the end of a range, so the threads finish close together. With
// pieces of a fixed eighth, the two threads of that host finished the int4 model's decode GEMVs
// 0.9-4.1 us apart (medians; gate/up 4.1 of its 64 us) and its LM head 116 us apart (of 1537).
template <class F>
void parallel_ranges(int64_t nchunks, double cost_per_chunk, F&& fn) {
  if (nchunks <= 0) return;
  ThreadPool& pool = ThreadPool::get();
  constexpr int64_t kMaxRanges = 64, kMaxPieceDivisor = 8, kMinPieceDivisor = 256;
  int64_t ranges = split_count(cost_per_chunk * static_cast<double>(nchunks), pool.size());
  ranges = ranges < nchunks ? ranges : nchunks;
  ranges = ranges < kMaxRanges ? ranges : kMaxRanges;
  if (ranges <= 1) return fn(int64_t{0}, nchunks);
  // Range r: (begin << 32 | end) of its chunks not yet taken (nchunks < 2^31: rows of a weight).
  struct alignas(64) Range { std::atomic<uint64_t> v; };
  Range range[kMaxRanges];
  for (int64_t r = 0; r < ranges; ++r)
    range[r].v.store(static_cast<uint64_t>(nchunks * r / ranges) << 32 | static_cast<uint64_t>(nchunks * (r + 1) / ranges),
                     std::memory_order_relaxed);
  const int64_t max_piece = (nchunks / ranges + kMaxPieceDivisor - 1) / kMaxPieceDivisor;
  const int64_t min_piece = (nchunks / ranges + kMinPieceDivisor - 1) / kMinPieceDivisor;
  // Takes a piece from the front (own range) or back (another's) of range r: a quarter of the
  // chunks it has left, within [min_piece, max_piece].
  const auto take = [&](int64_t r, bool front, int64_t* c0, int64_t* c1) {
    uint64_t v = range[r].v.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t b = static_cast<int64_t>(v >> 32), e = static_cast<int64_t>(v & 0xffffffffu);
      if (b >= e) return false;
      const int64_t quarter = (e - b) / 4, piece = quarter > max_piece ? max_piece : quarter > min_piece ? quarter : min_piece;
      const int64_t nb = front ? (b + piece < e ? b + piece : e) : b, ne = front ? e : (e - piece > b ? e - piece : b);
      if (range[r].v.compare_exchange_weak(v, static_cast<uint64_t>(nb) << 32 | static_cast<uint64_t>(ne),
                                           std::memory_order_relaxed)) {
        *c0 = front ? b : ne;
        *c1 = front ? nb : e;
        return true;
      }
    }
  };
  pool.parallel_for(ranges, [&](int64_t t) {
    int64_t c0, c1;
    while (take(t, true, &c0, &c1)) fn(c0, c1);
    for (int64_t k = 1; k < ranges; ++k)
      while (take((t + k) % ranges, false, &c0, &c1)) fn(c0, c1);
  });
}

}  // namespace tsorch
