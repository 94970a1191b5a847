// Persistent thread pool (see thread_pool.h).
//
// A job is published as (fn, ctx, ntasks) and its tasks are claimed one index at a time from
// `next`, which holds the job's number in its high 32 bits and the next index in its low 32. The
// caller claims tasks too and waits only until every task has run, not until every worker has
// shown up: on a loaded machine (more runnable threads than cores) a descheduled worker then
// costs nothing unless it is in the middle of a task, where waiting for all workers made every one
// of the hundreds of jobs of a decode step wait for a time slice. A worker that wakes up late
// finds the job closed: claiming is a compare-and-swap on `next`, which fails once the job's
// number has changed, so it never runs a task of a job it did not read the arguments of.
#include "thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tsorch {

namespace {

// Workers spin this long after a job before sleeping, so that back-to-back kernel calls (a decode
// step is hundreds of them) do not pay a wake-up each. Eager decode has gaps of JS work between
// calls; with 200 us, 7-10% of its decode GEMVs found the worker asleep, which on the VM measured
// (AMD EPYC Zen 5, 2 vCPUs) joined 80-230 us late; with 2 ms about half as many, and int4
// Qwen3-0.6B-shaped eager decode ran 3-4% faster. (OpenMP runtimes spin 200 ms by default.)
constexpr auto kSpin = std::chrono::milliseconds(2);
// The caller spins this long for workers to finish their tasks before yielding its CPU.
constexpr auto kWaitSpin = std::chrono::microseconds(50);
constexpr double kMinParallelWork = 32768;
// Tasks per published job (the low 32 bits of `next`; the top value marks a closed job).
constexpr int64_t kMaxTasks = int64_t{1} << 31;
constexpr uint64_t kIndexMask = 0xffffffffu;

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
  uint64_t job = 0;   // number of the last published job (under `submit`)
  // The current job's arguments: written before `next` opens the job, read by claimers after.
  std::atomic<void (*)(void*, int64_t)> fn{nullptr};
  std::atomic<void*> ctx{nullptr};
  std::atomic<int64_t> ntasks{0}, base{0};
  std::atomic<uint64_t> next{0};   // job << 32 | next index
  std::atomic<int64_t> done{0};    // tasks of the current job that have finished
  std::mutex m;                    // with cv: sleeping workers
  std::condition_variable cv;
  int sleepers = 0;                // under m
};

ThreadPool& ThreadPool::get() {
  static ThreadPool* pool = new ThreadPool(default_threads());  // intentionally never freed
  return *pool;
}

ThreadPool::ThreadPool(int nthreads) : s_(new State), nthreads_(nthreads) {
  for (int i = 1; i < nthreads_; ++i) std::thread([this] { worker_loop(); }).detach();
}

// Claims and runs tasks of job `job` until it has none left (or is no longer current).
void ThreadPool::work(uint64_t job) {
  t_in_task = true;
  for (;;) {
    uint64_t v = s_->next.load(std::memory_order_acquire);
    // `next` holds the low 32 bits of the job number (run() shifts the 64-bit count left by 32):
    // compared in full, every job after the 2^32nd failed here, and the calling thread stopped
    // claiming tasks (a server decoding for ~40 hours at 30k jobs/s).
    if (v >> 32 != (job & kIndexMask)) break;
    const auto fn = s_->fn.load(std::memory_order_acquire);
    void* const ctx = s_->ctx.load(std::memory_order_acquire);
    const int64_t i = static_cast<int64_t>(v & kIndexMask);
    if (i >= s_->ntasks.load(std::memory_order_acquire)) break;
    const int64_t base = s_->base.load(std::memory_order_acquire);
    if (!s_->next.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
    fn(ctx, base + i);
    s_->done.fetch_add(1, std::memory_order_release);
  }
  t_in_task = false;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  // The number of an open job other than `seen`, else `seen` (also while a job is being published).
  const auto next_job = [&] {
    const uint64_t v = s_->next.load(std::memory_order_acquire);
    return (v & kIndexMask) == kIndexMask ? seen : v >> 32;
  };
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t job;
    for (int spins = 1; (job = next_job()) == seen; ++spins) {
      cpu_relax();
      if (spins % 256 == 0 && std::chrono::steady_clock::now() - start > kSpin) {
        std::unique_lock<std::mutex> lock(s_->m);
        ++s_->sleepers;
        s_->cv.wait(lock, [&] { return next_job() != seen; });
        --s_->sleepers;
      }
    }
    seen = job;
    work(job);
  }
}

void ThreadPool::run(int64_t ntasks, void (*fn)(void*, int64_t), void* ctx) {
  if (ntasks <= 0) return;
  if (nthreads_ == 1 || ntasks == 1 || t_in_task) {
    for (int64_t i = 0; i < ntasks; ++i) fn(ctx, i);
    return;
  }
  std::lock_guard<std::mutex> submit(s_->submit);
  for (int64_t base = 0; base < ntasks; base += kMaxTasks) {
    const int64_t n = ntasks - base < kMaxTasks ? ntasks - base : kMaxTasks;
    const uint64_t job = ++s_->job;
    // Close the previous job for good (a claimer holding its last `next` value now fails), then
    // write the arguments, then open the new job.
    s_->next.store(job << 32 | kIndexMask, std::memory_order_seq_cst);
    s_->fn.store(fn, std::memory_order_release);
    s_->ctx.store(ctx, std::memory_order_release);
    s_->ntasks.store(n, std::memory_order_release);
    s_->base.store(base, std::memory_order_release);
    s_->done.store(0, std::memory_order_relaxed);
    // Index 0 is the calling thread's, run before it claims others: a job's first task stays on
    // the thread that runs the serial work between jobs, whatever the workers' timing. (With
    // every index claimed, a spinning worker took range 0 of parallel_ranges in some jobs and the
    // caller in others, so which core held which part of a job's output changed from job to job.
    // Calling thread first, the recorded decode-token kernel calls replayed with the two builds
    // alternating in one process, ms per token: int4 8.89 -> 8.63, int8 13.64 -> 13.19, bfloat16
    // 24.63 -> 24.55; AMD EPYC Zen 5, 2 threads.)
    s_->next.store(job << 32 | 1, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(s_->m);
      if (s_->sleepers > 0) s_->cv.notify_all();
    }
    t_in_task = true;
    fn(ctx, base);
    t_in_task = false;
    s_->done.fetch_add(1, std::memory_order_release);
    work(job);
    // The other tasks are running on workers: spin a little, then give the CPU away in case one
    // of them waits for it (more runnable threads than cores).
    const auto start = std::chrono::steady_clock::now();
    bool yield = false;
    for (int spins = 1; s_->done.load(std::memory_order_acquire) != n; ++spins) {
      if (yield) std::this_thread::yield();
      else cpu_relax();
      if (spins % 64 == 0 && !yield) yield = std::chrono::steady_clock::now() - start > kWaitSpin;
    }
  }
}

int64_t split_count(double work, int64_t max_tasks) {
  if (work < kMinParallelWork || max_tasks < 1) return 1;
  return max_tasks;
}

}  // namespace tsorch
