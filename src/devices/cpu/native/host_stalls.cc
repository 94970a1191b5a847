// host_stalls (ops.h): how much of each pool thread's time the host takes away. Every pool thread
// spins reading the steady clock, all at once, and counts each gap between two consecutive reads
// longer than a threshold: time in which the thread did not run (an interrupt, the hypervisor's
// own tick, another tenant's turn on the core). Batch-1 decode joins its threads some 200 times a
// token, so a thread stopped in the middle of a job holds up both, where one long streaming read
// (the bandwidth behind the decode limit) goes on at the other thread's rate: a stall costs a
// decode step up to its whole length and the read about half of it. On the VM measured in session
// 25 (AMD EPYC Zen 5, 2 vCPUs) each thread lost 5-7% of its time, ~1350 gaps a second: one of
// ~34 us every 998 us (a 1 kHz beat the guest does not count; its own timer runs at 250 Hz) and
// irregular ones of up to a few ms.
#include <algorithm>
#include <chrono>
#include <vector>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

std::vector<double> host_stalls(double seconds, double min_gap_us) {
  using clock = std::chrono::steady_clock;
  ThreadPool& pool = ThreadPool::get();
  const int64_t T = pool.size();
  // Per task: its gaps' count and total, and the lengths of its first kKept gaps (microseconds) for
  // the percentiles, in storage sized and touched before the clock starts, so that nothing the
  // probe does inside its loop (a vector growing, a page fault) is timed as a gap.
  constexpr int64_t kKept = int64_t{1} << 16;
  struct alignas(64) Gaps {
    std::vector<float> kept;
    int64_t count = 0;
    double total_us = 0;
  };
  std::vector<Gaps> gaps(static_cast<size_t>(T));
  for (Gaps& g : gaps) g.kept.assign(static_cast<size_t>(kKept), 0.f);
  const auto span = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  const auto threshold = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::micro>(min_gap_us));
  // One task per pool thread, normally each on its own thread (a thread that finds a task unclaimed
  // runs it too, after its own).
  pool.parallel_for(T, [&](int64_t t) {
    Gaps& g = gaps[static_cast<size_t>(t)];
    float* kept = g.kept.data();
    int64_t count = 0;
    double total = 0;
    auto last = clock::now();
    const auto end = last + span;
    while (last < end) {
      const auto now = clock::now();
      if (now - last > threshold) {
        const float us = std::chrono::duration<float, std::micro>(now - last).count();
        if (count < kKept) kept[count] = us;
        ++count;
        total += us;
      }
      last = now;
    }
    g.count = count;
    g.total_us = total;
  });
  std::vector<double> r{static_cast<double>(T)};
  std::vector<float> all;
  for (Gaps& g : gaps) {
    r.push_back(static_cast<double>(g.count));
    r.push_back(g.total_us * 1e-6);
    all.insert(all.end(), g.kept.begin(), g.kept.begin() + std::min(g.count, kKept));
  }
  std::sort(all.begin(), all.end());
  const auto at = [&](double q) { return all.empty() ? 0.0 : static_cast<double>(all[static_cast<size_t>(q * (all.size() - 1))]); };
  r.push_back(at(0.5));
  r.push_back(at(0.99));
  r.push_back(at(1.0));
  return r;
}

}  // namespace tsorch
