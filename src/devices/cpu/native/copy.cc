// copy: strided copy with dtype conversion.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "dtype.h"
#include "ops.h"
#include "strided.h"

namespace tsorch {

namespace {

// Storage types, one per dtype code.
struct Half { uint16_t bits; };
struct BFloat { uint16_t bits; };
struct Bool { uint8_t v; };
template <int DT> struct Storage;
template <> struct Storage<kF32> { using T = float; };
template <> struct Storage<kF16> { using T = Half; };
template <> struct Storage<kBF16> { using T = BFloat; };
template <> struct Storage<kI32> { using T = int32_t; };
template <> struct Storage<kI64> { using T = int64_t; };
template <> struct Storage<kBool> { using T = Bool; };

template <class T> constexpr bool is_float_storage =
    std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

inline float as_float(float x) { return x; }
inline float as_float(Half x) { return f16_to_f32(x.bits); }
inline float as_float(BFloat x) { return bf16_to_f32(x.bits); }

// float -> integer truncates toward zero; NaN gives 0 and out-of-range values saturate.
template <class I>
I float_to_int(float f) {
  if (std::isnan(f)) return 0;
  if (f <= static_cast<float>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (f >= static_cast<float>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(f);
}

template <class D, class S>
D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (is_float_storage<S>) {
    const float f = as_float(s);
    if constexpr (std::is_same_v<D, float>) return f;
    else if constexpr (std::is_same_v<D, Half>) return Half{f32_to_f16(f)};
    else if constexpr (std::is_same_v<D, BFloat>) return BFloat{f32_to_bf16(f)};
    else if constexpr (std::is_same_v<D, Bool>) return Bool{static_cast<uint8_t>(f != 0.f)};
    else return float_to_int<D>(f);
  } else {
    // Integers and bool (0/1, any nonzero byte reads as true).
    int64_t i;
    if constexpr (std::is_same_v<S, Bool>) i = s.v != 0;
    else i = s;
    if constexpr (std::is_same_v<D, float>) return static_cast<float>(i);
    else if constexpr (std::is_same_v<D, Half>) return Half{f32_to_f16(static_cast<float>(i))};
    else if constexpr (std::is_same_v<D, BFloat>) return BFloat{f32_to_bf16(static_cast<float>(i))};
    else if constexpr (std::is_same_v<D, Bool>) return Bool{static_cast<uint8_t>(i != 0)};
    else return static_cast<D>(i);  // int64 -> int32 wraps
  }
}

template <int SD, int DD>
void copy_run(const void* src, int64_t so, int64_t ss, void* dst, int64_t doff, int64_t ds,
              int64_t n) {
  using S = typename Storage<SD>::T;
  using D = typename Storage<DD>::T;
  const S* s = static_cast<const S*>(src) + so;
  D* d = static_cast<D*>(dst) + doff;
  if (ss == 1 && ds == 1) {
    if constexpr (SD == DD) {
      std::memcpy(d, s, n * sizeof(S));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * ds] = convert<D>(s[i * ss]);
  }
}

using CopyRun = void (*)(const void*, int64_t, int64_t, void*, int64_t, int64_t, int64_t);

template <int SD>
CopyRun pick_dst(int dd) {
  switch (dd) {
    case kF32: return copy_run<SD, kF32>;
    case kF16: return copy_run<SD, kF16>;
    case kBF16: return copy_run<SD, kBF16>;
    case kI32: return copy_run<SD, kI32>;
    case kI64: return copy_run<SD, kI64>;
    default: return copy_run<SD, kBool>;
  }
}

CopyRun pick(int sd, int dd) {
  switch (sd) {
    case kF32: return pick_dst<kF32>(dd);
    case kF16: return pick_dst<kF16>(dd);
    case kBF16: return pick_dst<kBF16>(dd);
    case kI32: return pick_dst<kI32>(dd);
    case kI64: return pick_dst<kI64>(dd);
    default: return pick_dst<kBool>(dd);
  }
}

}  // namespace

void copy(const void* src, int src_dtype, const Dims& src_strides, void* dst, int dst_dtype,
          const Dims& dst_strides, const Dims& shape) {
  const CopyRun run = pick(src_dtype, dst_dtype);
  const Dims* const strides[2] = {&src_strides, &dst_strides};
  for_each_strided<2>(shape, strides, [&](const int64_t* off, int64_t n, const int64_t* st) {
    run(src, off[0], st[0], dst, off[1], st[1], n);
  });
}

}  // namespace tsorch
