// Memory read bandwidth of this host as the kernels see it: a streaming read of a buffer, split
// over the thread pool (the same threads the decode kernels use). For benchmarks (npm run bench).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::vector<double> read_bandwidth(int64_t bytes, int reps) {
  const int64_t words = bytes / 64 * 8;
  uint64_t* buf = static_cast<uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(words) * 8));
  if (!buf) return {};
  ThreadPool& pool = ThreadPool::get();
  const int64_t tasks = pool.size();
  // First touch from the pool's threads, so that each reads memory it placed.
  pool.parallel_for(tasks, [&](int64_t t) {
    std::memset(buf + words * t / tasks, 1, static_cast<size_t>(words * (t + 1) / tasks - words * t / tasks) * 8);
  });
  std::vector<double> out;
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    pool.parallel_for(tasks, [&](int64_t t) {
      uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const uint64_t* p = buf + words * t / tasks;
      const int64_t n = words * (t + 1) / tasks - words * t / tasks;
      for (int64_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
      uint64_t s = 0;
      for (uint64_t a : acc) s += a;
      sink = sink + s;
    });
    out.push_back(static_cast<double>(words * 8) / (now_seconds() - t0));
  }
  std::free(buf);
  return out;
}

}  // namespace tsorch
