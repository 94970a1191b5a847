// reduce and cumsum over the last axis. Float sums, means, products and cumulative sums
// accumulate in double and round once to float32 at the end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "dtype.h"
#include "ops.h"
#include "thread_pool.h"
#include "isa_clones.h"

namespace tsorch {

namespace {

// A single float row at least this long is scanned for its extremum over the pool.
constexpr int64_t kParallelScan = 65536;

double sum_f32(const float* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
  for (; i < n; ++i) acc[0] += x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The float scans below are compiled for AVX-512, AVX2 and the baseline, chosen at load time
// (TSORCH_ISA_CLONES, isa_clones.h), over GCC/Clang vector extensions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));

inline f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline bool any_lane(const i32x16& m) {
  uint64_t w[8];
  std::memcpy(w, &m, sizeof w);
  return ((w[0] | w[1]) | (w[2] | w[3])) | ((w[4] | w[5]) | (w[6] | w[7]));
}

// Index of the max (or min) of float x[0..n), n >= 1: the first NaN if any, else the first
// extremum. One pass keeps 16 lane-wise extrema and NaN flags (no branch per element); a second
// finds the first 16-element block holding the extremum (or a NaN), then its first such element.
template <bool MAX>
TSORCH_ISA_CLONES int64_t arg_extreme_scan(const float* x, int64_t n) {
  int64_t i = 0;
  float e = x[0];
  bool nan = false;
  if (n >= 16) {
    f32x16 ext = load16(x);
    i32x16 isnan = ext != ext;
    for (i = 16; i + 16 <= n; i += 16) {
      const f32x16 v = load16(x + i);
      isnan |= v != v;
      ext = (MAX ? v > ext : v < ext) ? v : ext;
    }
    nan = any_lane(isnan);
    e = ext[0];
    for (int j = 1; j < 16; ++j) e = (MAX ? ext[j] > e : ext[j] < e) ? ext[j] : e;
  }
  for (; i < n; ++i) {
    nan |= x[i] != x[i];
    e = (MAX ? x[i] > e : x[i] < e) ? x[i] : e;
  }
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const f32x16 v = load16(x + k);
    if (any_lane(nan ? v != v : v == e)) break;
  }
  for (; k < n; ++k)
    if (nan ? x[k] != x[k] : x[k] == e) return k;
  return 0;
}

// Index of the max (or min) of x[0..n), n >= 1: the first NaN if any, else the first extremum.
template <class T, bool MAX>
int64_t arg_extreme(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) return arg_extreme_f32(x, n, MAX);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x[best])) break;
      if (std::isnan(x[i])) { best = i; break; }
    }
    if (MAX ? x[i] > x[best] : x[i] < x[best]) best = i;
  }
  return best;
}

template <class T>
void reduce_typed(int op, const T* x, void* out, int64_t outer, int64_t n) {
  constexpr bool is_float = std::is_same_v<T, float>;
  using Acc = std::conditional_t<is_float, float, int64_t>;  // sum / prod output type
  parallel_rows(outer, 2.0 * n, [&](int64_t r) {
    const T* row = x + r * n;
    switch (op) {
      case kSum:
      case kMean:
        if constexpr (is_float) {
          const double s = sum_f32(row, n);
          static_cast<float*>(out)[r] = static_cast<float>(op == kMean ? s / static_cast<double>(n) : s);
        } else {
          uint64_t s = 0;  // wraps like int64
          for (int64_t i = 0; i < n; ++i) s += static_cast<uint64_t>(static_cast<int64_t>(row[i]));
          static_cast<int64_t*>(out)[r] = static_cast<int64_t>(s);
        }
        break;
      case kProd:
        if constexpr (is_float) {
          double p = 1;
          for (int64_t i = 0; i < n; ++i) p *= row[i];
          static_cast<Acc*>(out)[r] = static_cast<float>(p);
        } else {
          uint64_t p = 1;
          for (int64_t i = 0; i < n; ++i) p *= static_cast<uint64_t>(static_cast<int64_t>(row[i]));
          static_cast<Acc*>(out)[r] = static_cast<int64_t>(p);
        }
        break;
      case kMax: static_cast<T*>(out)[r] = row[arg_extreme<T, true>(row, n)]; break;
      case kMin: static_cast<T*>(out)[r] = row[arg_extreme<T, false>(row, n)]; break;
      case kArgmax: static_cast<int64_t*>(out)[r] = arg_extreme<T, true>(row, n); break;
      default: static_cast<int64_t*>(out)[r] = arg_extreme<T, false>(row, n); break;  // kArgmin
    }
  });
}

}  // namespace

int64_t arg_extreme_f32(const float* x, int64_t n, bool max) {
  return max ? arg_extreme_scan<true>(x, n) : arg_extreme_scan<false>(x, n);
}

namespace {

// argmax / argmin of one long float row (a step's logits) over the pool: each task scans a
// contiguous piece, and the pieces combine in order (the first piece with a NaN, else the first
// piece holding the extremum), so the index equals the single scan's.
int64_t arg_extreme_f32_parallel(const float* x, int64_t n, bool max) {
  ThreadPool& pool = ThreadPool::get();
  const int64_t tasks = std::min<int64_t>(split_count(static_cast<double>(n), pool.size()), n);
  if (tasks <= 1) return arg_extreme_f32(x, n, max);
  int64_t found[64];
  const int64_t T = std::min<int64_t>(tasks, 64);
  pool.parallel_for(T, [&](int64_t t) {
    const int64_t lo = n * t / T, hi = n * (t + 1) / T;
    found[t] = lo + arg_extreme_f32(x + lo, hi - lo, max);
  });
  int64_t best = found[0];
  for (int64_t t = 0; t < T; ++t) {
    const float v = x[found[t]];
    if (v != v) return found[t];
    if (t > 0 && (max ? v > x[best] : v < x[best])) best = found[t];
  }
  return best;
}

}  // namespace

void reduce(int op, const void* x, int dtype, void* out, int64_t outer, int64_t n) {
  if (dtype == kF32 && outer == 1 && n >= kParallelScan && (op == kArgmax || op == kArgmin || op == kMax || op == kMin)) {
    const float* row = static_cast<const float*>(x);
    const int64_t i = arg_extreme_f32_parallel(row, n, op == kArgmax || op == kMax);
    if (op == kArgmax || op == kArgmin) *static_cast<int64_t*>(out) = i;
    else *static_cast<float*>(out) = row[i];
    return;
  }
  switch (dtype) {
    case kF32: return reduce_typed(op, static_cast<const float*>(x), out, outer, n);
    case kI32: return reduce_typed(op, static_cast<const int32_t*>(x), out, outer, n);
    default: return reduce_typed(op, static_cast<const int64_t*>(x), out, outer, n);
  }
}

void cumsum(const void* x, int dtype, void* out, int64_t outer, int64_t n) {
  if (dtype == kF32) {
    const float* xs = static_cast<const float*>(x);
    float* os = static_cast<float*>(out);
    parallel_rows(outer, 2.0 * n, [&](int64_t r) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) os[r * n + i] = static_cast<float>(s += xs[r * n + i]);
    });
  } else {
    const int64_t* xs = static_cast<const int64_t*>(x);
    int64_t* os = static_cast<int64_t*>(out);
    parallel_rows(outer, 2.0 * n, [&](int64_t r) {
      uint64_t s = 0;
      for (int64_t i = 0; i < n; ++i) os[r * n + i] = static_cast<int64_t>(s += static_cast<uint64_t>(xs[r * n + i]));
    });
  }
}

}  // namespace tsorch
