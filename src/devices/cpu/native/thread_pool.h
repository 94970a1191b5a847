// The addon's persistent thread pool: the calling (JS) thread plus size()-1 workers that spin
// briefly between jobs and then sleep on a condition variable. The caller runs tasks too.
#pragma once

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
  // the next index, the calling thread included), and returns when all are done, without waiting
  // for workers that did not take part. Runs inline when the pool has one thread, when
  // there is one task, or when called from inside a pool task (no nested parallelism).
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

}  // namespace tsorch
