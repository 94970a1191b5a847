// unary, binary and where: element-wise kernels.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "dtype.h"
#include "exp_any.h"
#include "ops.h"
#include "strided.h"
#include "thread_pool.h"
#include "isa_clones.h"

namespace tsorch {

namespace {

// Contiguous (row-major) strides of a shape.
Dims contiguous_strides(const Dims& shape) {
  Dims s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// unary
// ---------------------------------------------------------------------------------------------

// One value of a unary op (always inlined, so that logistic_run's per-ISA loops below vectorize
// SiLU and sigmoid).
inline __attribute__((always_inline)) float apply_unary(int op, float x) {
  switch (op) {
    case kNeg: return -x;
    case kExp: return std::exp(x);
    case kLog: return std::log(x);
    case kSqrt: return std::sqrt(x);
    case kRsqrt: return 1.f / std::sqrt(x);
    case kTanh: return std::tanh(x);
    case kSigmoid: return 1.f / (1.f + exp_any(-x));
    case kSilu: return x / (1.f + exp_any(-x));
    case kGelu: return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case kGeluTanh:
      return 0.5f * x * (1.f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case kAbs: return std::fabs(x);
    case kSin: return std::sin(x);
    case kCos: return std::cos(x);
    case kRelu: return x < 0.f ? 0.f : x;  // NaN stays NaN
    case kSoftplus: return x > 20.f ? x : std::log1p(std::exp(x));  // torch's threshold = 20
    case kReciprocal: return 1.f / x;
    case kSquare: return x * x;
    default: return std::erf(x);  // kErf
  }
}

// SiLU and sigmoid through 1 / (1 + e^-x) (exp_any.h), in loops compiled for AVX-512,
// AVX2 and the baseline (TSORCH_ISA_CLONES) that GCC vectorizes.
template <int OP>
TSORCH_ISA_CLONES void logistic_run(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = apply_unary(OP, x[i]);
}

template <int OP>
void unary_run(const float* x, float* out, int64_t n) {
  if constexpr (OP == kSilu || OP == kSigmoid) return logistic_run<OP>(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = apply_unary(OP, x[i]);
}

template <int... OPS>
constexpr void (*unary_table[])(const float*, float*, int64_t) = {unary_run<OPS>...};

// Every unary op's loop, by op code (unary, and the unary steps of fused chains).
constexpr auto& kUnaryRuns =
    unary_table<kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kSilu, kGelu, kGeluTanh, kAbs,
                kSin, kCos, kRelu, kSoftplus, kReciprocal, kSquare, kErf>;

// ---------------------------------------------------------------------------------------------
// binary
// ---------------------------------------------------------------------------------------------

// Wrapping integer arithmetic (signed overflow is undefined in C++).
template <class T> T wrap_add(T a, T b) { using U = std::make_unsigned_t<T>; return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); }
template <class T> T wrap_sub(T a, T b) { using U = std::make_unsigned_t<T>; return static_cast<T>(static_cast<U>(a) - static_cast<U>(b)); }
template <class T> T wrap_mul(T a, T b) { using U = std::make_unsigned_t<T>; return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); }

// One op on one dtype: `T f(T, T)` for arithmetic, `uint8_t f(T, T)` for comparisons. `div_zero`
// records an integer division by zero (the result there is 0).
template <int OP, class T>
struct BinOp {
  bool div_zero = false;
  auto f(T a, T b) {
    constexpr bool is_float = std::is_same_v<T, float>;
    if constexpr (OP == kAdd) { if constexpr (is_float) return a + b; else return wrap_add(a, b); }
    else if constexpr (OP == kSub) { if constexpr (is_float) return a - b; else return wrap_sub(a, b); }
    else if constexpr (OP == kMul) { if constexpr (is_float) return a * b; else return wrap_mul(a, b); }
    else if constexpr (OP == kDiv) {
      if constexpr (is_float) {
        return a / b;
      } else {
        if (b == 0) { div_zero = true; return T(0); }
        if (b == -1) return wrap_sub(T(0), a);  // avoids the INT_MIN / -1 trap
        return static_cast<T>(a / b);           // truncates toward zero
      }
    }
    else if constexpr (OP == kMaximum) {
      if constexpr (is_float) { if (std::isnan(a) || std::isnan(b)) return a + b; }
      return a > b ? a : b;
    }
    else if constexpr (OP == kMinimum) {
      if constexpr (is_float) { if (std::isnan(a) || std::isnan(b)) return a + b; }
      return a < b ? a : b;
    }
    else if constexpr (OP == kPow) { return std::pow(a, b); }
    else if constexpr (OP == kEq) return static_cast<uint8_t>(a == b);
    else if constexpr (OP == kNe) return static_cast<uint8_t>(a != b);
    else if constexpr (OP == kLt) return static_cast<uint8_t>(a < b);
    else if constexpr (OP == kLe) return static_cast<uint8_t>(a <= b);
    else if constexpr (OP == kGt) return static_cast<uint8_t>(a > b);
    else if constexpr (OP == kGe) return static_cast<uint8_t>(a >= b);
    else if constexpr (OP == kLogicalAnd) return static_cast<uint8_t>((a != 0) && (b != 0));
    else return static_cast<uint8_t>((a != 0) || (b != 0));  // kLogicalOr
  }
};

// Runs one op over an innermost run, with fast paths for contiguous and broadcast operands.
template <int OP, class T>
bool binary_run(const void* av, const void* bv, void* outv, const int64_t* off, int64_t n,
                const int64_t* st) {
  BinOp<OP, T> op;
  const T* a = static_cast<const T*>(av) + off[0];
  const T* b = static_cast<const T*>(bv) + off[1];
  using R = decltype(op.f(T(), T()));
  R* out = static_cast<R*>(outv) + off[2];
  const int64_t sa = st[0], sb = st[1];
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = op.f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T bb = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = op.f(a[i], bb);
  } else if (sa == 0 && sb == 1) {
    const T aa = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = op.f(aa, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = op.f(a[i * sa], b[i * sb]);
  }
  return !op.div_zero;
}

using BinaryRun = bool (*)(const void*, const void*, void*, const int64_t*, int64_t, const int64_t*);

template <class T, int... OPS>
constexpr BinaryRun binary_table[] = {binary_run<OPS, T>...};

// Bool is stored as uint8_t; only comparisons and logical ops reach it (addon.cc checks).
template <class T>
BinaryRun pick_binary(int op) {
  if constexpr (std::is_same_v<T, float>) {
    return binary_table<T, kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow, kEq, kNe, kLt, kLe,
                        kGt, kGe, kLogicalAnd, kLogicalOr>[op];
  } else {
    // Integer pow is rejected by addon.cc; the slot holds add to keep the table dense.
    return binary_table<T, kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kAdd, kEq, kNe, kLt, kLe,
                        kGt, kGe, kLogicalAnd, kLogicalOr>[op];
  }
}

// ---------------------------------------------------------------------------------------------
// where
// ---------------------------------------------------------------------------------------------

template <class T>
void where_run(const uint8_t* cond, const void* av, const void* bv, void* outv,
               const int64_t* off, int64_t n, const int64_t* st) {
  const uint8_t* c = cond + off[0];
  const T* a = static_cast<const T*>(av) + off[1];
  const T* b = static_cast<const T*>(bv) + off[2];
  T* out = static_cast<T*>(outv) + off[3];
  for (int64_t i = 0; i < n; ++i) out[i] = c[i * st[0]] ? a[i * st[1]] : b[i * st[2]];
}

// ---------------------------------------------------------------------------------------------
// fused chains (compile/)
// ---------------------------------------------------------------------------------------------

// out[i] = a[i] OP b[i] over contiguous blocks (the binary steps of fused chains).
template <int OP>
void binary_block(const float* a, const float* b, float* out, int64_t n) {
  BinOp<OP, float> op;
  for (int64_t i = 0; i < n; ++i) out[i] = op.f(a[i], b[i]);
}

// By op code: the float ops a chain may hold (kAdd .. kPow).
constexpr void (*kBinaryBlocks[])(const float*, const float*, float*, int64_t) = {
    binary_block<kAdd>, binary_block<kSub>, binary_block<kMul>, binary_block<kDiv>,
    binary_block<kMaximum>, binary_block<kMinimum>, binary_block<kPow>};

// Elements per block: every step's values for one block stay in L1.
constexpr int64_t kFusedBlock = 256;

// One run of n elements of a fused chain: input k's element i at in[k][i * st[k]], the result's
// at out[i * out_st]; block by block, each step one loop of its op over the block.
void fused_run(const int32_t* prog, int nsteps, const float* const* in, const int64_t* st, float* out,
               int64_t out_st, int64_t n) {
  thread_local std::vector<float> values;
  values.resize(static_cast<size_t>(nsteps) * kFusedBlock);
  float gathered[2][kFusedBlock];
  for (int64_t j0 = 0; j0 < n; j0 += kFusedBlock) {
    const int64_t len = std::min(kFusedBlock, n - j0);
    // An operand's values for this block: an earlier step's, or an input's (gathered if strided).
    auto operand = [&](int kind, int idx, int slot) -> const float* {
      if (kind == 1) return values.data() + static_cast<size_t>(idx) * kFusedBlock;
      const float* base = in[idx] + j0 * st[idx];
      if (st[idx] == 1) return base;
      for (int64_t i = 0; i < len; ++i) gathered[slot][i] = base[i * st[idx]];
      return gathered[slot];
    };
    for (int s = 0; s < nsteps; ++s) {
      const int32_t* p = prog + s * 6;
      float* dst = values.data() + static_cast<size_t>(s) * kFusedBlock;
      const float* a = operand(p[2], p[3], 0);
      if (p[0] == 0) {
        kUnaryRuns[p[1]](a, dst, len);
      } else {
        const float* b = operand(p[4], p[5], 1);
        kBinaryBlocks[p[1]](a, b, dst, len);  // op checked by the exports: kAdd .. kPow
      }
    }
    const float* last = values.data() + static_cast<size_t>(nsteps - 1) * kFusedBlock;
    float* o = out + j0 * out_st;
    for (int64_t i = 0; i < len; ++i) o[i * out_st] = last[i];
  }
}

}  // namespace

void fused_elementwise(const int32_t* prog, int nsteps, const float* const* in, const Dims* in_strides,
                       int nin, float* out, const Dims& shape) {
  const Dims out_strides = contiguous_strides(shape);
  const Dims* strides[kMaxFusedInputs + 1];
  for (int k = 0; k < kMaxFusedInputs; ++k) strides[k] = k < nin ? &in_strides[k] : &out_strides;
  strides[kMaxFusedInputs] = &out_strides;
  for_each_strided<kMaxFusedInputs + 1>(shape, strides, [&](const int64_t* off, int64_t n, const int64_t* st) {
    const float* at[kMaxFusedInputs] = {};
    for (int k = 0; k < nin; ++k) at[k] = in[k] + off[k];
    fused_run(prog, nsteps, at, st, out + off[kMaxFusedInputs], st[kMaxFusedInputs], n);
  });
}

void fused_elementwise_contiguous(const int32_t* prog, int nsteps, const float* const* in, float* out,
                                  int64_t n) {
  static_assert(kMaxFusedInputs == 6, "a unit stride for every input");
  const int64_t unit[kMaxFusedInputs] = {1, 1, 1, 1, 1, 1};
  fused_run(prog, nsteps, in, unit, out, 1, n);
}

void unary(int op, const float* x, float* out, int64_t n) {
  const auto run = kUnaryRuns[op];
  ThreadPool& pool = ThreadPool::get();
  const int64_t tasks =
      std::max<int64_t>(1, std::min<int64_t>(split_count(8.0 * n, 4 * pool.size()), n / 4096));
  pool.parallel_for(tasks, [&](int64_t t) {
    const int64_t i0 = n * t / tasks, i1 = n * (t + 1) / tasks;
    run(x + i0, out + i0, i1 - i0);
  });
}

bool binary(int op, int dtype, const void* a, const Dims& a_strides, const void* b,
            const Dims& b_strides, void* out, const Dims& shape) {
  const BinaryRun run = dtype == kF32 ? pick_binary<float>(op)
                        : dtype == kI32 ? pick_binary<int32_t>(op)
                        : dtype == kI64 ? pick_binary<int64_t>(op)
                                        : pick_binary<uint8_t>(op);
  const Dims out_strides = contiguous_strides(shape);
  const Dims* const strides[3] = {&a_strides, &b_strides, &out_strides};
  std::atomic<bool> ok{true};
  for_each_strided<3>(shape, strides, [&](const int64_t* off, int64_t n, const int64_t* st) {
    if (!run(a, b, out, off, n, st)) ok.store(false, std::memory_order_relaxed);
  });
  return ok.load();
}

void where(const uint8_t* cond, const Dims& cond_strides, const void* a, const Dims& a_strides,
           const void* b, const Dims& b_strides, int dtype, void* out, const Dims& shape) {
  const int size = dtype_size(dtype);
  const auto run = size == 1 ? where_run<uint8_t>
                   : size == 2 ? where_run<uint16_t>
                   : size == 4 ? where_run<uint32_t>
                               : where_run<uint64_t>;
  const Dims out_strides = contiguous_strides(shape);
  const Dims* const strides[4] = {&cond_strides, &a_strides, &b_strides, &out_strides};
  for_each_strided<4>(shape, strides, [&](const int64_t* off, int64_t n, const int64_t* st) {
    run(cond, a, b, out, off, n, st);
  });
}

}  // namespace tsorch
