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
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// A task's record: its first kKept gaps as [begin, end) in clock ticks since the probe's origin,
// their count and total, and the span it recorded: from its first clock read to its last, or to
// the end of its kKept-th gap when it had more (what came after is not in `begins` / `ends`).
struct alignas(64) Gaps {
  std::vector<int64_t> begins, ends;
  int64_t count = 0;
  double total_us = 0;
  int64_t first = 0, last = 0;
};

// The fraction of the lost time that every task lost at once, over the span all tasks recorded
// (the latest first read to the earliest end), gaps clipped to it: T times the time in which all T
// tasks were inside a gap, over the clipped gaps' total. Exact, in clock ticks (a task's own gaps
// never overlap): 1 with one task that had gaps, 0 without gaps in the span, NaN when the tasks'
// spans do not overlap (a task run after another's, its worker absent).
double shared_fraction(const std::vector<Gaps>& gaps, int64_t kept) {
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  for (const Gaps& g : gaps) lo = std::max(lo, g.first), hi = std::min(hi, g.last);
  if (lo >= hi) return std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<int64_t, int>> events;  // (time, +1 a gap begins / -1 it ends)
  int64_t lost = 0;
  for (const Gaps& g : gaps)
    for (int64_t i = 0; i < std::min(g.count, kept); ++i) {
      const int64_t b = std::max(g.begins[i], lo), e = std::min(g.ends[i], hi);
      if (b >= e) continue;
      events.push_back({b, 1});
      events.push_back({e, -1});
      lost += e - b;
    }
  if (lost == 0) return 0;
  std::sort(events.begin(), events.end());  // an end before a begin at the same time
  const int64_t T = static_cast<int64_t>(gaps.size());
  int64_t all = 0, since = lo, inside = 0;
  for (const auto& [time, step] : events) {
    if (inside == T) all += time - since;
    inside += step;
    since = time;
  }
  return static_cast<double>(T * all) / static_cast<double>(lost);
}

}  // namespace

std::vector<double> host_stalls(double seconds, double min_gap_us) {
  using clock = std::chrono::steady_clock;
  ThreadPool& pool = ThreadPool::get();
  const int64_t T = pool.size();
  // Per task (Gaps): storage for its first kKept gaps, sized and touched before the clock starts,
  // so that nothing the probe does inside its loop (a vector growing, a page fault) is timed as a
  // gap.
  constexpr int64_t kKept = int64_t{1} << 16;
  std::vector<Gaps> gaps(static_cast<size_t>(T));
  for (Gaps& g : gaps) g.begins.assign(static_cast<size_t>(kKept), 0), g.ends.assign(static_cast<size_t>(kKept), 0);
  const auto span = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  const auto threshold = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::micro>(min_gap_us));
  // One task per pool thread, normally each on its own thread (a thread that finds a task unclaimed
  // runs it too, after its own).
  const auto origin = clock::now();
  pool.parallel_for(T, [&](int64_t t) {
    Gaps& g = gaps[static_cast<size_t>(t)];
    int64_t* begins = g.begins.data();
    int64_t* ends = g.ends.data();
    int64_t count = 0;
    double total = 0;
    auto last = clock::now();
    g.first = (last - origin).count();
    const auto end = last + span;
    while (last < end) {
      const auto now = clock::now();
      if (now - last > threshold) {
        if (count < kKept) begins[count] = (last - origin).count(), ends[count] = (now - origin).count();
        ++count;
        total += std::chrono::duration<double, std::micro>(now - last).count();
      }
      last = now;
    }
    g.count = count;
    g.total_us = total;
    g.last = count > kKept ? ends[kKept - 1] : (last - origin).count();
  });
  std::vector<double> r{static_cast<double>(T)};
  std::vector<double> all;
  for (Gaps& g : gaps) {
    r.push_back(static_cast<double>(g.count));
    r.push_back(g.total_us * 1e-6);
    for (int64_t i = 0; i < std::min(g.count, kKept); ++i)
      all.push_back(std::chrono::duration<double, std::micro>(clock::duration(g.ends[i] - g.begins[i])).count());
  }
  std::sort(all.begin(), all.end());
  const auto at = [&](double q) { return all.empty() ? 0.0 : all[static_cast<size_t>(q * (all.size() - 1))]; };
  r.push_back(at(0.5));
  r.push_back(at(0.99));
  r.push_back(at(1.0));
  r.push_back(shared_fraction(gaps, kKept));
  return r;
}

}  // namespace tsorch
