// Memory read bandwidth of this host as the kernels see it: a streaming read of a buffer, split
// over the thread pool (the same threads the decode kernels use). For benchmarks (npm run bench).
// The read loop is compiled for AVX-512, AVX2 and the baseline, chosen at load time: with the
// baseline's 16-byte loads the same two threads read 54 GB/s where 64-byte loads read 63-67
// (AMD EPYC Zen 5 VM, 1 GiB), so a baseline loop understated the bandwidth the kernels compete with.
// The buffer is memory of the kind the weights live in (huge_pages.h: 2 MB pages where the platform
// gives them): on that host two threads read 52-53 GB/s from 4 KB pages and 68-70 from 2 MB pages,
// so a read of ordinary heap memory understated the bandwidth the decode GEMVs can get by ~25%.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "huge_pages.h"
#include "ops.h"
#include "thread_pool.h"
#include "isa_clones.h"

namespace tsorch {

namespace {

// The sum of n words (n a multiple of 8) in 8 independent lanes, which GCC vectorizes to the
// widest loads of the clone.
TSORCH_ISA_CLONES
uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::vector<double> read_bandwidth(int64_t bytes, int reps) {
  const int64_t words = bytes / 64 * 8;
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
  std::vector<double> out;
  volatile uint64_t sink = 0;
  const auto read_all = [&] {
    pool.parallel_for(tasks, [&](int64_t t) {
      sink = sink + sum_words(buf + words * t / tasks, words * (t + 1) / tasks - words * t / tasks);
    });
  };
  // One untimed read first: in a process holding a model, the first read of the fresh buffer ran
  // at 6-11 GB/s and the next ones at 48-64 (the paravirtualized VM measured, where mapping work
  // is done by the host), an outlier of the mapping, not of the memory.
  read_all();
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    read_all();
    out.push_back(static_cast<double>(words * 8) / (now_seconds() - t0));
  }
  if (huge.base) unmap_huge(huge);
  else std::free(buf);
  return out;
}

}  // namespace tsorch
