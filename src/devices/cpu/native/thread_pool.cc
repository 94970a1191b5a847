// Persistent thread pool (see thread_pool.h).
#include "thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tsorch {

namespace {

// Workers spin this long after a job before sleeping, so that back-to-back kernel calls (a decode
// step is hundreds of them) do not pay a futex wake-up each.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr double kMinParallelWork = 32768;

thread_local bool t_in_task = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// TSORCH_NUM_THREADS if it is a positive integer, else the CPUs this process may run on.
int default_threads() {
  if (const char* env = std::getenv("TSORCH_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1) return n > 1024 ? 1024 : static_cast<int>(n);
  }
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace

struct ThreadPool::State {
  std::mutex submit;  // one job at a time (calls may come from several JS threads)
  std::mutex m;
  std::condition_variable cv;
  std::atomic<uint64_t> generation{0};
  void (*fn)(void*, int64_t) = nullptr;
  void* ctx = nullptr;
  int64_t ntasks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int> busy{0};  // workers that have not finished the current job
  std::vector<std::thread> threads;
};

ThreadPool& ThreadPool::get() {
  static ThreadPool* pool = new ThreadPool(default_threads());  // intentionally never freed
  return *pool;
}

ThreadPool::ThreadPool(int nthreads) : s_(new State), nthreads_(nthreads) {
  for (int i = 1; i < nthreads_; ++i) {
    s_->threads.emplace_back([this] { worker_loop(); });
    s_->threads.back().detach();
  }
}

void ThreadPool::work(void (*fn)(void*, int64_t), void* ctx) {
  t_in_task = true;
  for (;;) {
    int64_t i = s_->next.fetch_add(1, std::memory_order_relaxed);
    if (i >= s_->ntasks) break;
    fn(ctx, i);
  }
  t_in_task = false;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    int spins = 0;
    while (s_->generation.load(std::memory_order_acquire) == seen) {
      cpu_relax();
      if (++spins % 256 == 0 && std::chrono::steady_clock::now() - start > kSpin) {
        std::unique_lock<std::mutex> lock(s_->m);
        s_->cv.wait(lock, [&] { return s_->generation.load(std::memory_order_acquire) != seen; });
      }
    }
    seen = s_->generation.load(std::memory_order_acquire);
    work(s_->fn, s_->ctx);
    s_->busy.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::run(int64_t ntasks, void (*fn)(void*, int64_t), void* ctx) {
  if (ntasks <= 0) return;
  if (nthreads_ == 1 || ntasks == 1 || t_in_task) {
    for (int64_t i = 0; i < ntasks; ++i) fn(ctx, i);
    return;
  }
  std::lock_guard<std::mutex> submit(s_->submit);
  s_->fn = fn;
  s_->ctx = ctx;
  s_->ntasks = ntasks;
  s_->next.store(0, std::memory_order_relaxed);
  s_->busy.store(nthreads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(s_->m);
    s_->generation.fetch_add(1, std::memory_order_release);
  }
  s_->cv.notify_all();
  work(fn, ctx);
  for (int spins = 0; s_->busy.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 100000) cpu_relax();
    else std::this_thread::yield();
  }
}

int64_t split_count(double work, int64_t max_tasks) {
  if (work < kMinParallelWork || max_tasks < 1) return 1;
  return max_tasks;
}

}  // namespace tsorch
