// host_stalls (ops.h): how much of each pool thread's time the host takes away. Every pool thread
// spins reading the steady clock, all at once, and counts each gap between two consecutive reads
// longer than a threshold: time in which the thread did not run (an interrupt, the hypervisor's
// own tick, another tenant's turn on the core). It also measures how much of that time every thread
// lost at once (the whole VM off its cores), which costs a decode step and the streaming read behind
// its limit alike, against time one thread lost alone, which can hold up a step's other threads at
// its next join (some 200 a token) while a streaming read goes on at their rate. On the VM measured
// (AMD EPYC Zen 5, 2 vCPUs; sessions 25-26) each thread lost 5-7% of its time, ~1350 gaps a second:
// one of ~34 us every ~1000 us (a 1 kHz beat the guest does not count; its own timer runs at
// 250 Hz) and irregular ones of up to a few ms; 82-91% of the lost time was lost by both threads at
// once (session 26).
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// The fraction of the threads' kept lost time that every thread lost at once: T times the time in
// which all T threads were inside a kept gap, over the kept gaps' total (a thread's own gaps never
// overlap); 1 with one thread, 0 without gaps.
template <class Gaps>
double shared_fraction(const std::vector<Gaps>& gaps, int64_t kept) {
  std::vector<std::pair<double, int>> events;  // (time, +1 a gap starts / -1 it ends)
  double lost = 0;
  for (const Gaps& g : gaps)
    for (int64_t i = 0; i < std::min(g.count, kept); ++i) {
      events.push_back({g.starts[i], 1});
      events.push_back({g.starts[i] + g.kept[i], -1});
      lost += g.kept[i];
    }
  if (lost <= 0) return 0;
  std::sort(events.begin(), events.end());  // an end before a start at the same time
  const int64_t T = static_cast<int64_t>(gaps.size());
  double all = 0, since = 0;
  int64_t inside = 0;
  for (const auto& [time, step] : events) {
    if (inside == T) all += time - since;
    inside += step;
    since = time;
  }
  return std::min(1.0, static_cast<double>(T) * all / lost);
}

}  // namespace

std::vector<double> host_stalls(double seconds, double min_gap_us) {
  using clock = std::chrono::steady_clock;
  ThreadPool& pool = ThreadPool::get();
  const int64_t T = pool.size();
  // Per task: its gaps' count and total, and the starts and lengths of its first kKept gaps
  // (microseconds since `origin`) for the percentiles and the shared time, in storage sized and
  // touched before the clock starts, so that nothing the probe does inside its loop (a vector
  // growing, a page fault) is timed as a gap.
  constexpr int64_t kKept = int64_t{1} << 16;
  struct alignas(64) Gaps {
    std::vector<float> kept;
    std::vector<double> starts;
    int64_t count = 0;
    double total_us = 0;
  };
  std::vector<Gaps> gaps(static_cast<size_t>(T));
  for (Gaps& g : gaps) g.kept.assign(static_cast<size_t>(kKept), 0.f), g.starts.assign(static_cast<size_t>(kKept), 0.0);
  const auto span = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  const auto threshold = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::micro>(min_gap_us));
  // One task per pool thread, normally each on its own thread (a thread that finds a task unclaimed
  // runs it too, after its own).
  const auto origin = clock::now();
  pool.parallel_for(T, [&](int64_t t) {
    Gaps& g = gaps[static_cast<size_t>(t)];
    float* kept = g.kept.data();
    double* starts = g.starts.data();
    int64_t count = 0;
    double total = 0;
    auto last = clock::now();
    const auto end = last + span;
    while (last < end) {
      const auto now = clock::now();
      if (now - last > threshold) {
        const float us = std::chrono::duration<float, std::micro>(now - last).count();
        if (count < kKept) kept[count] = us, starts[count] = std::chrono::duration<double, std::micro>(last - origin).count();
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
  r.push_back(shared_fraction(gaps, kKept));
  return r;
}

}  // namespace tsorch
