// reduce and cumsum over the last axis. Float sums, means, products and cumulative sums
// accumulate in double and round once to float32 at the end.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "dtype.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

double sum_f32(const float* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
  for (; i < n; ++i) acc[0] += x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Index of the max (or min) of float x[0..n), n >= 1: the first NaN if any, else the first
// extremum. One pass keeps 16 lane-wise extrema and NaN flags (vectorizable, no branch per
// element); a second finds the first index holding the extremum (or the first NaN).
template <bool MAX>
int64_t arg_extreme_f32(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float ext[kLanes];
  int nan[kLanes];
  for (int j = 0; j < kLanes; ++j) ext[j] = x[0], nan[j] = 0;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float v = x[i + j];
      nan[j] |= v != v;
      ext[j] = (MAX ? v > ext[j] : v < ext[j]) ? v : ext[j];
    }
  int any_nan = 0;
  float e = ext[0];
  for (int j = 0; j < kLanes; ++j) {
    any_nan |= nan[j];
    e = (MAX ? ext[j] > e : ext[j] < e) ? ext[j] : e;
  }
  for (; i < n; ++i) {
    any_nan |= x[i] != x[i];
    e = (MAX ? x[i] > e : x[i] < e) ? x[i] : e;
  }
  for (int64_t k = 0; k < n; ++k)
    if (any_nan ? x[k] != x[k] : x[k] == e) return k;
  return 0;
}

// Index of the max (or min) of x[0..n), n >= 1: the first NaN if any, else the first extremum.
template <class T, bool MAX>
int64_t arg_extreme(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) return arg_extreme_f32<MAX>(x, n);
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

void reduce(int op, const void* x, int dtype, void* out, int64_t outer, int64_t n) {
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
