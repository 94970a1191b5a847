// linearArgmax on cpu (compile's linear-argmax fusion, src/compile/passes/linear_argmax.ts): a
// greedy step's final RMS norm, LM head and argmax as one graph node and, for few rows, one pool job.
//
// The norm runs once (the eager rms_norm) into a buffer of the calling thread. For few rows (the
// direct GEMV kernels) the tasks are column ranges, cut as gemm_parallel would: each computes its
// logits with gemm_range (as an eager linear) into a buffer of the calling thread and, while they
// are in cache, the index of their first NaN or else first maximum; the caller then combines the
// tasks in column order, so the id equals reduce's argmax (the first NaN, else the first maximum)
// over the eager logits, and no separate pass re-reads them. More rows run gemm_parallel and the
// same per-row scan afterwards. A block-quantized weight (FusedWeight) runs the same way through
// linear_quantized's kernels (FusedProducts), so the logits are again the eager ones.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "napi_args.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// Tasks per thread (as linear_group.cc and gemm_parallel's direct split).
constexpr int64_t kTasksPerThread = 4;

// Index in [n0, n1) of the first NaN of row[n0..n1), else of its first maximum (n1 > n0).
int64_t first_max(const float* row, int64_t n0, int64_t n1) { return n0 + arg_extreme_f32(row + n0, n1 - n0, true); }

}  // namespace

void linear_argmax(const LinearArgmaxArgs& a) {
  thread_local std::vector<float> normed, logits;
  thread_local std::vector<int64_t> found;
  const float* x = normed_rows(a, normed);
  const int64_t M = a.M, N = a.w.N;
  logits.resize(static_cast<size_t>(M * N));
  float* y = logits.data();
  const FusedProducts products(x, M, a.K, &a.w, 1);
  if (!products.direct()) {
    products.whole(0, nullptr, y);
    for (int64_t m = 0; m < M; ++m) a.out[m] = first_max(y + m * N, 0, N);
    return;
  }
  ThreadPool& pool = ThreadPool::get();
  const int64_t panel = products.granule(), panels = (N + panel - 1) / panel;
  const int64_t threads = split_count(2.0 * M * N * a.K, pool.size());
  const int64_t tasks = std::max<int64_t>(1, std::min(panels, threads * kTasksPerThread));
  found.resize(static_cast<size_t>(tasks * M));
  int64_t* idx = found.data();
  pool.parallel_for(tasks, [&](int64_t t) {
    const int64_t n0 = std::min(N, panels * t / tasks * panel), n1 = std::min(N, panels * (t + 1) / tasks * panel);
    if (n1 <= n0) {
      for (int64_t m = 0; m < M; ++m) idx[t * M + m] = -1;
      return;
    }
    products.range(0, nullptr, y, N, n0, n1);
    for (int64_t m = 0; m < M; ++m) idx[t * M + m] = first_max(y + m * N, n0, n1);
  });
  for (int64_t m = 0; m < M; ++m) {
    const float* row = y + m * N;
    int64_t best = -1;
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t i = idx[t * M + m];
      if (i < 0) continue;
      if (std::isnan(row[i])) { best = i; break; }
      if (best < 0 || row[i] > row[best]) best = i;
    }
    a.out[m] = best;
  }
}

// linearArgmax(x, M, K, normW, normDtype, eps, offset, w, wDtype, N, out, scales, bits): see native.ts.
napi_value LinearArgmaxExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearArgmax", 13);
  LinearArgmaxArgs a;
  if (!read_normed_input(args, &a)) return nullptr;
  const int64_t N = args.integer(9, "N", 1);
  const Buffer out = args.buffer(10, "out");
  if (args.failed() || !read_fused_weight(args, 7, 11, 12, N, a.K, &a.w)) return nullptr;
  args.fits(out, kI64, {a.M});
  if (args.failed()) return nullptr;
  a.out = static_cast<int64_t*>(out.data);
  linear_argmax(a);
  return undefined(env);
}

}  // namespace tsorch
