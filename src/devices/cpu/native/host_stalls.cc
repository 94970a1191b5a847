// host_stalls (ops.h): how much of each pool thread's time the host takes away. Every pool thread
// spins reading the steady clock, all at once, and records each gap between two consecutive reads
// longer than a threshold: time in which the thread did not run (an interrupt, the hypervisor's
// own tick, another tenant's turn on the core). Batch-1 decode joins its threads some 200 times a
// token, so a thread stopped in the middle of a job holds up both, where one long streaming read
// (the bandwidth behind the decode limit) goes on on the other thread: such stalls cost a decode
// step more than they cost the read. On the VM measured in session 25 (AMD EPYC Zen 5, 2 vCPUs)
// each thread lost 5-7% of its time, ~1350 gaps a second: one of ~34 us every 998 us (a 1 kHz tick
// outside the guest, whose own timer runs at 250 Hz) and irregular ones of up to ~2 ms.
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
  std::vector<std::vector<float>> gaps(static_cast<size_t>(T));  // microseconds, per task
  const auto span = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  const auto threshold = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::micro>(min_gap_us));
  // One task per pool thread, normally each on its own thread (a thread that finds a task unclaimed
  // runs it too, after its own).
  pool.parallel_for(T, [&](int64_t t) {
    std::vector<float>& g = gaps[static_cast<size_t>(t)];
    auto last = clock::now();
    const auto end = last + span;
    while (last < end) {
      const auto now = clock::now();
      if (now - last > threshold) g.push_back(std::chrono::duration<float, std::micro>(now - last).count());
      last = now;
    }
  });
  std::vector<double> r{static_cast<double>(T)};
  std::vector<float> all;
  for (const std::vector<float>& g : gaps) {
    double stolen = 0;
    for (float x : g) stolen += x;
    r.push_back(static_cast<double>(g.size()));
    r.push_back(stolen * 1e-6);
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  const auto at = [&](double q) { return all.empty() ? 0.0 : static_cast<double>(all[static_cast<size_t>(q * (all.size() - 1))]); };
  r.push_back(at(0.5));
  r.push_back(at(0.99));
  r.push_back(at(1.0));
  return r;
}

}  // namespace tsorch
