// linearArgmax on cpu (compile's linear-argmax fusion, src/compile/passes/linear_argmax.ts): a
// greedy step's final RMS norm, LM head and argmax as one graph node and, for few rows, one pool job.
//
// The norm runs once (the eager rms_norm) into a buffer of the calling thread. For few rows (the
// direct GEMV kernels) the column pieces of parallel_ranges are the tasks: each computes its
// logits with gemm_range (as an eager linear) into a buffer of the calling thread and, while they
// are in cache, the index of their first NaN or else first maximum, merged into the row's best so
// that the id equals reduce's argmax (the first NaN, else the first maximum) over the eager
// logits, and no separate pass re-reads them. More rows (not the direct kernels, or over
// kMaxArgmaxRows) run gemm_parallel and the same per-row scan afterwards. A block-quantized weight
// (FusedWeight) runs the same way through linear_quantized's kernels (FusedProducts), so the
// logits are again the eager ones.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "napi_args.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// The most rows the direct path takes (the direct GEMV kernels take a few).
constexpr int64_t kMaxArgmaxRows = 64;

// Index in [n0, n1) of the first NaN of row[n0..n1), else of its first maximum (n1 > n0).
int64_t first_max(const float* row, int64_t n0, int64_t n1) { return n0 + arg_extreme_f32(row + n0, n1 - n0, true); }

// Of the candidates i and j (-1: none) of a row, the one a front-to-back scan for the first NaN,
// else the first maximum, would return: a NaN before any number, the lower index among NaNs or
// equal values. Associative and commutative, so pieces merge in any order.
int64_t merge_first_max(const float* row, int64_t i, int64_t j) {
  if (i < 0) return j;
  if (j < 0) return i;
  const bool ni = std::isnan(row[i]), nj = std::isnan(row[j]);
  if (ni != nj) return ni ? i : j;
  if (!ni && row[i] != row[j]) return row[i] > row[j] ? i : j;
  return std::min(i, j);
}

}  // namespace

void linear_argmax(const LinearArgmaxArgs& a) {
  thread_local std::vector<float> normed, logits;
  const float* x = normed_rows(a, normed);
  const int64_t M = a.M, N = a.w.N;
  logits.resize(static_cast<size_t>(M * N));
  float* y = logits.data();
  const FusedProducts products(x, M, a.K, &a.w, 1);
  if (!products.direct() || M > kMaxArgmaxRows) {
    products.whole(0, nullptr, y);
    for (int64_t m = 0; m < M; ++m) a.out[m] = first_max(y + m * N, 0, N);
    return;
  }
  // The columns split as the decode GEMVs split them (parallel_ranges: a contiguous range per
  // thread, the threads finishing together), each piece's first maximum merged into out[m] by
  // the order-free rule of merge_first_max. (With 4 tasks a thread claimed in turn, the Qwen3-0.6B-
  // shaped int4 LM head's threads finished ~280 us apart, ~12% of its time.)
  const int64_t panel = products.granule(), panels = (N + panel - 1) / panel;
  for (int64_t m = 0; m < M; ++m) a.out[m] = -1;
  std::mutex merge;
  parallel_ranges(panels, 2.0 * M * panel * a.K, [&](int64_t c0, int64_t c1) {
    const int64_t n0 = c0 * panel, n1 = std::min(N, c1 * panel);
    products.range(0, nullptr, y, N, n0, n1);
    int64_t local[kMaxArgmaxRows];
    for (int64_t m = 0; m < M; ++m) local[m] = first_max(y + m * N, n0, n1);
    std::lock_guard<std::mutex> lock(merge);
    for (int64_t m = 0; m < M; ++m) a.out[m] = merge_first_max(y + m * N, a.out[m], local[m]);
  });
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
