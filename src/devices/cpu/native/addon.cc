// Node-API glue of the cpu device's addon: one export per function of native.ts (the ABI and its
// contracts live there). Each export parses and checks its arguments (napi_args.h), so that bad
// input throws a JS TypeError / RangeError instead of reaching a kernel, then runs the kernel
// (ops.h) synchronously on the thread pool.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#if !defined(_WIN32)
#include <fcntl.h>
#include <unistd.h>
#endif

#include "cpu.h"
#include "dtype.h"
#include "graph.h"
#include "huge_pages.h"
#include "mmap.h"
#include "napi_args.h"
#include "ops.h"
#include "quant_kernels.h"
#include "spatial.h"
#include "fused.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

const char* const kBinaryNames[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "eq",
                                    "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"};
const char* const kReduceNames[] = {"sum", "mean", "max", "min", "argmax", "argmin", "prod"};

// numThreads(): the size of the thread pool.
napi_value NumThreads(napi_env env, napi_callback_info info) {
  Args args(env, info, "numThreads", 0);
  if (args.failed()) return nullptr;
  napi_value v;
  napi_create_int32(env, ThreadPool::get().size(), &v);
  return v;
}

// cpuFeatures(): detected CPU features and the kernel tier in use.
napi_value CpuFeatures(napi_env env, napi_callback_info info) {
  Args args(env, info, "cpuFeatures", 0);
  if (args.failed()) return nullptr;
  napi_value v;
  const std::string& s = cpu_features();
  napi_create_string_utf8(env, s.data(), s.size(), &v);
  return v;
}

// A JS array of the numbers in r.
napi_value number_array(napi_env env, const std::vector<double>& r) {
  napi_value arr;
  napi_create_array_with_length(env, r.size(), &arr);
  for (size_t i = 0; i < r.size(); ++i) {
    napi_value v;
    napi_create_double(env, r[i], &v);
    napi_set_element(env, arr, static_cast<uint32_t>(i), v);
  }
  return arr;
}

// Whether the kernel probes' weight format is one they run (bits 0: a float weight of w_dtype; 8 or 4:
// block-quantized); throws the TypeError naming the argument if not.
bool probe_weight_format(Args& args, int w_dtype, int64_t bits) {
  if (!args.check(bits == 0 || bits == 8 || bits == 4, true, "bits must be 0 (a float weight), 8 or 4, got %lld",
                  static_cast<long long>(bits)))
    return false;
  return bits != 0 || float_dtype(args, w_dtype, "wDtype");
}

// decodeReadBandwidth(wDtype, bits, callBytes, bytes, reps): decode_read_bandwidth's numbers
// (membw.cc; for benchmarks).
napi_value DecodeReadBandwidth(napi_env env, napi_callback_info info) {
  Args args(env, info, "decodeReadBandwidth", 5);
  const int w_dtype = args.dtype(0, "wDtype");
  const int64_t bits = args.integer(1, "bits");
  const int64_t call_bytes = args.integer(2, "callBytes", 1);
  const int64_t bytes = args.integer(3, "bytes", 1);
  const int64_t reps = args.integer(4, "reps", 1, 1000);
  if (args.failed()) return nullptr;
  if (!probe_weight_format(args, w_dtype, bits)) return nullptr;
  return number_array(env, decode_read_bandwidth(w_dtype, static_cast<int>(bits), call_bytes, bytes,
                                                 static_cast<int>(reps)));
}

// decodeComputeRate(wDtype, bits, bytes, reps): decode_compute_rate's numbers (membw.cc; for
// benchmarks).
napi_value DecodeComputeRate(napi_env env, napi_callback_info info) {
  Args args(env, info, "decodeComputeRate", 4);
  const int w_dtype = args.dtype(0, "wDtype");
  const int64_t bits = args.integer(1, "bits");
  const int64_t bytes = args.integer(2, "bytes", 1, int64_t{1} << 30);
  const int64_t reps = args.integer(3, "reps", 1, 1000);
  if (args.failed()) return nullptr;
  if (!probe_weight_format(args, w_dtype, bits)) return nullptr;
  return number_array(env, decode_compute_rate(w_dtype, static_cast<int>(bits), bytes, static_cast<int>(reps)));
}

// hostStalls(seconds, minGapUs): host_stalls' numbers (host_stalls.cc; for benchmarks).
napi_value HostStalls(napi_env env, napi_callback_info info) {
  Args args(env, info, "hostStalls", 2);
  const double seconds = args.number(0, "seconds"), min_gap_us = args.number(1, "minGapUs");
  if (args.failed()) return nullptr;
  if (!args.check(seconds > 0 && seconds <= 10, false, "seconds must be in (0, 10], got %g", seconds)) return nullptr;
  if (!args.check(min_gap_us >= 0 && min_gap_us <= 1e6, false, "minGapUs must be in [0, 1e6], got %g", min_gap_us)) return nullptr;
  return number_array(env, host_stalls(seconds, min_gap_us));
}

// readBandwidth(bytes, reps): bytes/s of each of `reps` streaming reads of a buffer of `bytes`
// rounded down to whole 2 KB pieces, split over the thread pool (membw.cc; for benchmarks).
napi_value ReadBandwidth(napi_env env, napi_callback_info info) {
  Args args(env, info, "readBandwidth", 2);
  const int64_t bytes = args.integer(0, "bytes", 2048);
  const int64_t reps = args.integer(1, "reps", 1, 1000);
  if (args.failed()) return nullptr;
  return number_array(env, read_bandwidth(bytes, static_cast<int>(reps)));
}

// readBandwidthInCalls(bytes, reps, callBytes): read_bandwidth with a list of call sizes; returns
// the `reps` whole-read rates, then the `reps` pass rates (each pass made right after a whole
// read; membw.cc; for benchmarks).
napi_value ReadBandwidthInCalls(napi_env env, napi_callback_info info) {
  Args args(env, info, "readBandwidthInCalls", 3);
  const int64_t bytes = args.integer(0, "bytes", 2048);
  const int64_t reps = args.integer(1, "reps", 1, 1000);
  const std::vector<int64_t> calls = args.ints(2, "callBytes", -1, 1);
  if (args.failed()) return nullptr;
  if (!args.check(!calls.empty() && calls.size() <= 100000, false, "argument 'callBytes' must hold 1 to 100000 sizes, got %zu",
                  calls.size()))
    return nullptr;
  // Bounded so that no size sum overflows and every call's 2 KB pieces fit parallel_ranges.
  constexpr int64_t kMaxTotal = int64_t{1} << 40;
  int64_t total = 0;
  for (int64_t c : calls) total += c < kMaxTotal ? c : kMaxTotal;
  if (!args.check(total <= kMaxTotal, false, "argument 'callBytes' must sum to at most %lld bytes",
                  static_cast<long long>(kMaxTotal)))
    return nullptr;
  return number_array(env, read_bandwidth(bytes, static_cast<int>(reps), calls));
}

// muteStderr(): point fd 2 at /dev/null; returns a duplicate of the old fd 2 for restoreStderr,
// or -1 where that is not possible (then nothing changed).
napi_value MuteStderr(napi_env env, napi_callback_info info) {
  Args args(env, info, "muteStderr", 0);
  if (args.failed()) return nullptr;
  int saved = -1;
#if !defined(_WIN32)
  std::fflush(stderr);
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (saved >= 0 && dup2(null_fd, 2) < 0) {
      close(saved);
      saved = -1;
    }
    close(null_fd);
  }
#endif
  napi_value v;
  napi_create_int32(env, saved, &v);
  return v;
}

// restoreStderr(saved): undo muteStderr (saved = its result; -1 is a no-op).
napi_value RestoreStderr(napi_env env, napi_callback_info info) {
  Args args(env, info, "restoreStderr", 1);
  const int64_t saved = args.integer(0, "saved", -1);
  if (args.failed()) return nullptr;
#if !defined(_WIN32)
  if (saved >= 0) {
    std::fflush(stderr);
    dup2(static_cast<int>(saved), 2);
    close(static_cast<int>(saved));
  }
#endif
  return undefined(env);
}

// copy(src, srcDtype, srcStrides, dst, dstDtype, dstStrides, shape): strided copy and cast.
napi_value Copy(napi_env env, napi_callback_info info) {
  Args args(env, info, "copy", 7);
  const Buffer src = args.buffer(0, "src");
  const int sdt = args.dtype(1, "srcDtype");
  const Dims sst = args.ints(2, "srcStrides");
  const Buffer dst = args.buffer(3, "dst");
  const int ddt = args.dtype(4, "dstDtype");
  const Dims dstr = args.ints(5, "dstStrides");
  const Dims shape = args.ints(6, "shape", -1, 0);
  args.fits(src, sdt, shape, sst);
  args.fits(dst, ddt, shape, dstr);
  if (args.failed()) return nullptr;
  copy(src.data, sdt, sst, dst.data, ddt, dstr, shape);
  return undefined(env);
}

// unary(op, x, out, n): out[i] = op(x[i]) on float32.
napi_value Unary(napi_env env, napi_callback_info info) {
  Args args(env, info, "unary", 4);
  const int op = static_cast<int>(args.integer(0, "op", 0, kNumUnary - 1));
  const Buffer x = args.buffer(1, "x");
  const Buffer out = args.buffer(2, "out");
  const int64_t n = args.integer(3, "n");
  args.fits(x, kF32, {n});
  args.fits(out, kF32, {n});
  if (args.failed()) return nullptr;
  unary(op, static_cast<const float*>(x.data), static_cast<float*>(out.data), n);
  return undefined(env);
}

// binary(op, dtype, a, aStrides, b, bStrides, out, shape): broadcasting arithmetic / comparison.
napi_value Binary(napi_env env, napi_callback_info info) {
  Args args(env, info, "binary", 8);
  const int op = static_cast<int>(args.integer(0, "op", 0, kNumBinary - 1));
  const int dt = args.dtype(1, "dtype");
  const Buffer a = args.buffer(2, "a");
  const Dims as = args.ints(3, "aStrides");
  const Buffer b = args.buffer(4, "b");
  const Dims bs = args.ints(5, "bStrides");
  const Buffer out = args.buffer(6, "out");
  const Dims shape = args.ints(7, "shape", -1, 0);
  if (args.failed()) return nullptr;
  const bool logical = op == kLogicalAnd || op == kLogicalOr;
  const bool compare = op >= kEq && op <= kGe;
  const bool numeric = dt == kF32 || dt == kI32 || dt == kI64;
  const char* name = kBinaryNames[op];
  if (logical) args.check(dt == kBool, true, "%s needs bool inputs, got %s", name, dtype_name(dt));
  else if (compare) args.check(numeric || dt == kBool, true, "%s does not support %s", name, dtype_name(dt));
  else if (op == kPow) args.check(dt == kF32, true, "pow supports float32 only (integer pow is not supported), got %s", dtype_name(dt));
  else args.check(numeric, true, "%s supports float32, int32 and int64, got %s", name, dtype_name(dt));
  args.fits(a, dt, shape, as);
  args.fits(b, dt, shape, bs);
  args.fits(out, logical || compare ? static_cast<int>(kBool) : dt, shape);
  if (args.failed()) return nullptr;
  const bool ok = binary(op, dt, a.data, as, b.data, bs, out.data, shape);
  if (!args.check(ok, false, "integer division by zero")) return nullptr;
  return undefined(env);
}

// fusedElementwise(prog, nsteps, nin, in0, in0Strides, …, in5, in5Strides, out, shape): a fused
// float32 chain (see ops.h); unused inputs are null with empty strides.
napi_value FusedElementwise(napi_env env, napi_callback_info info) {
  Args args(env, info, "fusedElementwise", 5 + 2 * kMaxFusedInputs);
  const Buffer prog = args.buffer(0, "prog");
  const int64_t nsteps = args.integer(1, "nsteps", 1, 4096);
  const int nin = static_cast<int>(args.integer(2, "nin", 0, kMaxFusedInputs));
  Buffer in[kMaxFusedInputs];
  Dims in_strides[kMaxFusedInputs];
  for (int k = 0; k < kMaxFusedInputs; ++k) {
    in[k] = args.buffer(3 + 2 * k, "input", k >= nin);
    in_strides[k] = args.ints(4 + 2 * k, "inputStrides");
  }
  const Buffer out = args.buffer(3 + 2 * kMaxFusedInputs, "out");
  const Dims shape = args.ints(4 + 2 * kMaxFusedInputs, "shape", -1, 0);
  if (args.failed()) return nullptr;
  if (!args.check(prog.bytes >= static_cast<size_t>(nsteps) * 6 * 4, false, "prog holds fewer than %lld steps", static_cast<long long>(nsteps))) return nullptr;
  const int32_t* p = static_cast<const int32_t*>(prog.data);
  for (int64_t s = 0; s < nsteps; ++s) {
    const int32_t* q = p + s * 6;
    const bool unary_step = q[0] == 0;
    bool ok = (q[0] == 0 || q[0] == 1) && q[1] >= 0 && q[1] < (unary_step ? static_cast<int>(kNumUnary) : static_cast<int>(kPow) + 1);
    for (int o = 0; o < (unary_step ? 1 : 2) && ok; ++o) {
      const int kind = q[2 + 2 * o], idx = q[3 + 2 * o];
      ok = (kind == 0 && idx >= 0 && idx < nin) || (kind == 1 && idx >= 0 && idx < s);
    }
    if (!args.check(ok, false, "fusedElementwise: step %lld is malformed", static_cast<long long>(s))) return nullptr;
  }
  const float* ptrs[kMaxFusedInputs] = {};
  for (int k = 0; k < nin; ++k) {
    args.fits(in[k], kF32, shape, in_strides[k]);
    ptrs[k] = static_cast<const float*>(in[k].data);
  }
  args.fits(out, kF32, shape);
  if (args.failed()) return nullptr;
  fused_elementwise(p, static_cast<int>(nsteps), ptrs, in_strides, nin, static_cast<float*>(out.data), shape);
  return undefined(env);
}

// where(cond, condStrides, a, aStrides, b, bStrides, dtype, out, shape): out = cond ? a : b.
napi_value Where(napi_env env, napi_callback_info info) {
  Args args(env, info, "where", 9);
  const Buffer cond = args.buffer(0, "cond");
  const Dims cs = args.ints(1, "condStrides");
  const Buffer a = args.buffer(2, "a");
  const Dims as = args.ints(3, "aStrides");
  const Buffer b = args.buffer(4, "b");
  const Dims bs = args.ints(5, "bStrides");
  const int dt = args.dtype(6, "dtype");
  const Buffer out = args.buffer(7, "out");
  const Dims shape = args.ints(8, "shape", -1, 0);
  args.fits(cond, kBool, shape, cs);
  args.fits(a, dt, shape, as);
  args.fits(b, dt, shape, bs);
  args.fits(out, dt, shape);
  if (args.failed()) return nullptr;
  where(static_cast<const uint8_t*>(cond.data), cs, a.data, as, b.data, bs, dt, out.data, shape);
  return undefined(env);
}

// reduce(op, x, dtype, out, outer, n): last-axis sum / mean / max / min / argmax / argmin / prod.
napi_value Reduce(napi_env env, napi_callback_info info) {
  Args args(env, info, "reduce", 6);
  const int op = static_cast<int>(args.integer(0, "op", 0, kNumReduce - 1));
  const Buffer x = args.buffer(1, "x");
  const int dt = args.dtype(2, "dtype");
  const Buffer out = args.buffer(3, "out");
  const int64_t outer = args.integer(4, "outer");
  const int64_t n = args.integer(5, "n");
  if (args.failed()) return nullptr;
  const char* name = kReduceNames[op];
  args.check(dt == kF32 || dt == kI32 || dt == kI64, true,
             "reduce %s supports float32, int32 and int64, got %s", name, dtype_name(dt));
  args.check(op != kMean || dt == kF32, true, "mean supports float32 only, got %s", dtype_name(dt));
  const bool needs_values = op == kMax || op == kMin || op == kArgmax || op == kArgmin;
  args.check(!needs_values || n > 0 || outer == 0, false, "%s of an empty axis (n = 0)", name);
  const int out_dt = op == kArgmax || op == kArgmin ? static_cast<int>(kI64)
                     : op == kMax || op == kMin     ? dt
                     : dt == kF32                   ? static_cast<int>(kF32)
                                                    : static_cast<int>(kI64);
  args.fits(x, dt, {outer, n});
  args.fits(out, out_dt, {outer});
  if (args.failed()) return nullptr;
  reduce(op, x.data, dt, out.data, outer, n);
  return undefined(env);
}

// cumsum(x, dtype, out, outer, n): inclusive cumulative sum along the last axis.
napi_value Cumsum(napi_env env, napi_callback_info info) {
  Args args(env, info, "cumsum", 5);
  const Buffer x = args.buffer(0, "x");
  const int dt = args.dtype(1, "dtype");
  const Buffer out = args.buffer(2, "out");
  const int64_t outer = args.integer(3, "outer");
  const int64_t n = args.integer(4, "n");
  args.check(dt == kF32 || dt == kI64, true, "cumsum supports float32 and int64, got %s",
             dtype_name(dt));
  args.fits(x, dt, {outer, n});
  args.fits(out, dt, {outer, n});
  if (args.failed()) return nullptr;
  cumsum(x.data, dt, out.data, outer, n);
  return undefined(env);
}

// softmax(x, out, rows, n, log): row-wise softmax or log_softmax of float32.
napi_value Softmax(napi_env env, napi_callback_info info) {
  Args args(env, info, "softmax", 5);
  const Buffer x = args.buffer(0, "x");
  const Buffer out = args.buffer(1, "out");
  const int64_t rows = args.integer(2, "rows");
  const int64_t n = args.integer(3, "n");
  const int64_t log = args.integer(4, "log", 0, 1);
  args.fits(x, kF32, {rows, n});
  args.fits(out, kF32, {rows, n});
  if (args.failed()) return nullptr;
  softmax(static_cast<const float*>(x.data), static_cast<float*>(out.data), rows, n, log != 0);
  return undefined(env);
}

// linear(x, w, wDtype, bias, biasDtype, out, M, N, K): out = x @ w^T + bias.
napi_value Linear(napi_env env, napi_callback_info info) {
  Args args(env, info, "linear", 9);
  const Buffer x = args.buffer(0, "x");
  const Buffer w = args.buffer(1, "w");
  const int wdt = args.dtype(2, "wDtype");
  const Buffer bias = args.buffer(3, "bias", true);
  const int bdt = args.dtype(4, "biasDtype");
  const Buffer out = args.buffer(5, "out");
  const int64_t M = args.integer(6, "M"), N = args.integer(7, "N"), K = args.integer(8, "K");
  float_dtype(args, wdt, "wDtype");
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(x, kF32, {M, K});
  args.fits(w, wdt, {N, K});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  linear(static_cast<const float*>(x.data), w.data, wdt, bias.data, bdt,
         static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

// gatherLinear(x, weights, wDtype, idx, out, M, N, K): out[m] = x[m] @ weights[idx[m]]^T, with
// weights an array of E [N, K] Uint8Arrays of wDtype and idx int64 [M] (gather_linear.cc).
napi_value GatherLinear(napi_env env, napi_callback_info info) {
  Args args(env, info, "gather_linear", 8);
  const Buffer x = args.buffer(0, "x");
  const int wdt = args.dtype(2, "wDtype");
  const Buffer idx = args.buffer(3, "idx");
  const Buffer out = args.buffer(4, "out");
  const int64_t M = args.integer(5, "M"), N = args.integer(6, "N"), K = args.integer(7, "K");
  float_dtype(args, wdt, "wDtype");
  args.fits(x, kF32, {M, K});
  args.fits(idx, kI64, {M});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  // The weights array is read here (gatherLinear is never recorded into a native graph).
  size_t argc = 8;
  napi_value argv[8];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  bool is_array = false;
  napi_is_array(env, argv[1], &is_array);
  uint32_t E = 0;
  if (is_array) napi_get_array_length(env, argv[1], &E);
  if (!args.check(is_array && E > 0, true, "argument 'weights' must be a non-empty array of Uint8Arrays")) return nullptr;
  std::vector<const void*> w(E);
  for (uint32_t e = 0; e < E; ++e) {
    napi_value item;
    napi_get_element(env, argv[1], e, &item);
    bool is_typed = false;
    napi_is_typedarray(env, item, &is_typed);
    napi_typedarray_type type = napi_int8_array;
    size_t length = 0;
    void* data = nullptr;
    if (is_typed) napi_get_typedarray_info(env, item, &type, &length, &data, nullptr, nullptr);
    if (!args.check(type == napi_uint8_array, true, "weights[%u] must be a Uint8Array", e)) return nullptr;
    Buffer b;
    b.data = data;
    b.bytes = length;
    b.name = "weights[e]";
    if (!args.fits(b, wdt, {N, K})) return nullptr;
    w[e] = data;
  }
  const int64_t* ids = static_cast<const int64_t*>(idx.data);
  for (int64_t m = 0; m < M; ++m) {
    if (!args.check(ids[m] >= 0 && ids[m] < E, false, "expert index %lld is out of range for %u weights",
                    static_cast<long long>(ids[m]), E))
      return nullptr;
  }
  gather_linear(static_cast<const float*>(x.data), w.data(), wdt, E, ids, static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

// moeExperts(x, gateUp, down, wDtype, weights, ids, out, T, K, E, H, I): the routed experts of a
// silu-gated MoE block in one call (moe_experts.cc); x float32 [T, H], gateUp [E, 2I, H] and down
// [E, H, I] of wDtype, weights float32 [T, K], ids int64 [T, K], out float32 [T, H].
napi_value MoeExperts(napi_env env, napi_callback_info info) {
  Args args(env, info, "moe_experts", 12);
  const Buffer x = args.buffer(0, "x");
  const Buffer gate_up = args.buffer(1, "gateUp");
  const Buffer down = args.buffer(2, "down");
  const int wdt = args.dtype(3, "wDtype");
  const Buffer weights = args.buffer(4, "weights");
  const Buffer idx = args.buffer(5, "ids");
  const Buffer out = args.buffer(6, "out");
  const int64_t T = args.integer(7, "T"), K = args.integer(8, "K"), E = args.integer(9, "E");
  const int64_t H = args.integer(10, "H"), I = args.integer(11, "I");
  float_dtype(args, wdt, "wDtype");
  args.fits(x, kF32, {T, H});
  args.fits(gate_up, wdt, {E, 2 * I, H});
  args.fits(down, wdt, {E, H, I});
  args.fits(weights, kF32, {T, K});
  args.fits(idx, kI64, {T, K});
  args.fits(out, kF32, {T, H});
  if (args.failed()) return nullptr;
  const int64_t* ids = static_cast<const int64_t*>(idx.data);
  for (int64_t m = 0; m < T * K; ++m) {
    if (!args.check(ids[m] >= 0 && ids[m] < E, false, "expert index %lld is out of range for %lld experts",
                    static_cast<long long>(ids[m]), static_cast<long long>(E)))
      return nullptr;
  }
  moe_experts(static_cast<const float*>(x.data), gate_up.data, down.data, wdt, static_cast<const float*>(weights.data),
              ids, static_cast<float*>(out.data), T, K, E, H, I);
  return undefined(env);
}

// matmul(a, aStrides, b, bStrides, out, batch, M, N, K): batched strided float32 matmul.
napi_value Matmul(napi_env env, napi_callback_info info) {
  Args args(env, info, "matmul", 9);
  const Buffer a = args.buffer(0, "a");
  const Dims as = args.ints(1, "aStrides", 3);
  const Buffer b = args.buffer(2, "b");
  const Dims bs = args.ints(3, "bStrides", 3);
  const Buffer out = args.buffer(4, "out");
  const int64_t batch = args.integer(5, "batch"), M = args.integer(6, "M");
  const int64_t N = args.integer(7, "N"), K = args.integer(8, "K");
  args.fits(a, kF32, {batch, M, K}, as);
  args.fits(b, kF32, {batch, K, N}, bs);
  args.fits(out, kF32, {batch, M, N});
  if (args.failed()) return nullptr;
  matmul(static_cast<const float*>(a.data), as.data(), static_cast<const float*>(b.data),
         bs.data(), static_cast<float*>(out.data), batch, M, N, K);
  return undefined(env);
}

// sdpa(q, qStrides, k, kStrides, v, vStrides, out, mask, maskStrides, B, Hq, Hkv, Lq, Lk, D, Dv,
//      scale, softcap, causalOffset, window, sinks): attention with GQA, masks and sinks.
napi_value Sdpa(napi_env env, napi_callback_info info) {
  Args args(env, info, "sdpa", 22);
  const Buffer q = args.buffer(0, "q");
  const Dims qs = args.ints(1, "qStrides", 4);
  const Buffer k = args.buffer(2, "k");
  const Dims ks = args.ints(3, "kStrides", 4);
  const Buffer v = args.buffer(4, "v");
  const Dims vs = args.ints(5, "vStrides", 4);
  const Buffer out = args.buffer(6, "out");
  const Buffer mask = args.buffer(7, "mask", true);
  const Dims ms = mask.data ? args.ints(8, "maskStrides", 3) : Dims{0, 0, 0};
  const int64_t B = args.integer(9, "B"), Hq = args.integer(10, "Hq");
  const int64_t Hkv = args.integer(11, "Hkv", 1), Lq = args.integer(12, "Lq");
  const int64_t Lk = args.integer(13, "Lk"), D = args.integer(14, "D"), Dv = args.integer(15, "Dv");
  const double scale = args.number(16, "scale"), softcap = args.number(17, "softcap");
  const int64_t causal = args.integer(18, "causalOffset", -(int64_t(1) << 53));
  const int64_t window = args.integer(19, "window", -(int64_t(1) << 53));
  const int kvdt = args.dtype(20, "kvDtype");
  const Buffer sinks = args.buffer(21, "sinks", true);
  if (args.failed()) return nullptr;
  float_dtype(args, kvdt, "kvDtype");
  args.check(Hq % Hkv == 0, false, "Hq = %lld is not a multiple of Hkv = %lld",
             static_cast<long long>(Hq), static_cast<long long>(Hkv));
  args.fits(q, kF32, {B, Hq, Lq, D}, qs);
  args.fits(k, kvdt, {B, Hkv, Lk, D}, ks);
  args.fits(v, kvdt, {B, Hkv, Lk, Dv}, vs);
  args.fits(out, kF32, {B, Lq, Hq, Dv});
  if (mask.data) args.fits(mask, kF32, {B, Hq, Lq, Lk}, {ms[0], ms[1], ms[2], 1});
  if (sinks.data) args.fits(sinks, kF32, {Hq});
  if (args.failed()) return nullptr;
  SdpaArgs s{static_cast<const float*>(q.data), {qs[0], qs[1], qs[2], qs[3]},
             k.data, {ks[0], ks[1], ks[2], ks[3]},
             v.data, {vs[0], vs[1], vs[2], vs[3]},
             static_cast<float*>(out.data),
             static_cast<const float*>(mask.data), {ms[0], ms[1], ms[2]},
             B, Hq, Hkv, Lq, Lk, D, Dv,
             static_cast<float>(scale), static_cast<float>(softcap), causal, window, kvdt,
             static_cast<const float*>(sinks.data)};
  sdpa(s);
  return undefined(env);
}

// pagedKVWrite(k, v, kCache, vCache, slots, T, N, bs, Hkv, D, Dv, kvDtype): store rows at their
// slots (pools of kvDtype: float32, float16 or bfloat16).
napi_value PagedKVWrite(napi_env env, napi_callback_info info) {
  Args args(env, info, "pagedKVWrite", 12);
  const Buffer k = args.buffer(0, "k"), v = args.buffer(1, "v");
  const Buffer kc = args.buffer(2, "kCache"), vc = args.buffer(3, "vCache");
  const Buffer slots = args.buffer(4, "slots");
  const int64_t T = args.integer(5, "T"), N = args.integer(6, "N"), bs = args.integer(7, "bs", 1);
  const int64_t H = args.integer(8, "Hkv"), D = args.integer(9, "D"), Dv = args.integer(10, "Dv");
  const int kvdt = args.dtype(11, "kvDtype");
  if (args.failed()) return nullptr;
  if (!args.check(dtype_is_float(kvdt), true, "kvDtype must be float32, float16 or bfloat16")) return nullptr;
  args.fits(k, kF32, {T, H, D});
  args.fits(v, kF32, {T, H, Dv});
  args.fits(kc, kvdt, {N, bs, H, D});
  args.fits(vc, kvdt, {N, bs, H, Dv});
  args.fits(slots, kI32, {T});
  if (args.failed()) return nullptr;
  const int32_t* sl = static_cast<const int32_t*>(slots.data);
  if (!slots_in_pool(args, sl, T, N * bs)) return nullptr;
  paged_kv_write(static_cast<const float*>(k.data), static_cast<const float*>(v.data), kc.data, vc.data, kvdt,
                 sl, T, H * D, H * Dv);
  return undefined(env);
}

// pagedAttention(q, kCache, vCache, blockTables, tokenSeq, tokenPos, out, T, Hq, Hkv, D, Dv, N, bs,
//                S, maxBlocks, scale, softcap, window, kvDtype): attention through block tables.
napi_value PagedAttention(napi_env env, napi_callback_info info) {
  Args args(env, info, "pagedAttention", 20);
  const Buffer q = args.buffer(0, "q"), kc = args.buffer(1, "kCache"), vc = args.buffer(2, "vCache");
  const Buffer tables = args.buffer(3, "blockTables"), seq = args.buffer(4, "tokenSeq");
  const Buffer pos = args.buffer(5, "tokenPos"), out = args.buffer(6, "out");
  const int64_t T = args.integer(7, "T"), Hq = args.integer(8, "Hq"), Hkv = args.integer(9, "Hkv", 1);
  const int64_t D = args.integer(10, "D"), Dv = args.integer(11, "Dv"), N = args.integer(12, "N");
  const int64_t bs = args.integer(13, "bs", 1), S = args.integer(14, "S"), mb = args.integer(15, "maxBlocks");
  const double scale = args.number(16, "scale"), softcap = args.number(17, "softcap");
  const int64_t window = args.integer(18, "window");
  const int kvdt = args.dtype(19, "kvDtype");
  if (args.failed()) return nullptr;
  if (!args.check(dtype_is_float(kvdt), true, "kvDtype must be float32, float16 or bfloat16")) return nullptr;
  args.check(Hq % Hkv == 0, false, "Hq = %lld is not a multiple of Hkv = %lld",
             static_cast<long long>(Hq), static_cast<long long>(Hkv));
  args.fits(q, kF32, {T, Hq, D});
  args.fits(kc, kvdt, {N, bs, Hkv, D});
  args.fits(vc, kvdt, {N, bs, Hkv, Dv});
  args.fits(tables, kI32, {S, mb});
  args.fits(seq, kI32, {T});
  args.fits(pos, kI32, {T});
  args.fits(out, kF32, {T, Hq, Dv});
  if (args.failed()) return nullptr;
  const int32_t* tb = static_cast<const int32_t*>(tables.data);
  const int32_t* sq = static_cast<const int32_t*>(seq.data);
  const int32_t* ps = static_cast<const int32_t*>(pos.data);
  for (int64_t t = 0; t < T; ++t) {
    if (!args.check(sq[t] >= 0 && sq[t] < S && ps[t] >= 0 && ps[t] / bs < mb, false,
                    "token %lld: sequence %d / position %d is outside the block tables [%lld, %lld] x block size %lld",
                    static_cast<long long>(t), sq[t], ps[t], static_cast<long long>(S),
                    static_cast<long long>(mb), static_cast<long long>(bs)))
      return nullptr;
    const int64_t first = window > 0 ? std::max<int64_t>(0, ps[t] - window + 1) / bs : 0;
    for (int64_t b = first; b <= ps[t] / bs; ++b) {
      const int32_t id = tb[sq[t] * mb + b];
      if (!args.check(id >= 0 && id < N, false, "block table of sequence %d names block %d, outside the pool's %lld blocks",
                      sq[t], id, static_cast<long long>(N)))
        return nullptr;
    }
  }
  PagedAttentionArgs p{static_cast<const float*>(q.data), kc.data, vc.data, tb, sq, ps, static_cast<float*>(out.data),
                       T, Hq, Hkv, D, Dv, bs, mb, static_cast<float>(scale), static_cast<float>(softcap), window, kvdt};
  // The static KV cache of compiled generation (one block per sequence) has its own kernel.
  if (mb == 1) static_attention(p);
  else paged_attention(p);
  return undefined(env);
}

// rmsNorm(x, w, wDtype, out, rows, n, eps, offset): out = x * rsqrt(mean(x^2) + eps) * (offset + w).
napi_value RmsNorm(napi_env env, napi_callback_info info) {
  Args args(env, info, "rmsNorm", 8);
  const Buffer x = args.buffer(0, "x");
  const Buffer w = args.buffer(1, "w");
  const int wdt = args.dtype(2, "wDtype");
  const Buffer out = args.buffer(3, "out");
  const int64_t rows = args.integer(4, "rows"), n = args.integer(5, "n");
  const double eps = args.number(6, "eps"), offset = args.number(7, "offset");
  float_dtype(args, wdt, "wDtype");
  args.fits(x, kF32, {rows, n});
  args.fits(w, wdt, {n});
  args.fits(out, kF32, {rows, n});
  if (args.failed()) return nullptr;
  rms_norm(static_cast<const float*>(x.data), w.data, wdt, static_cast<float*>(out.data), rows, n,
           static_cast<float>(eps), static_cast<float>(offset));
  return undefined(env);
}

// causalConv1d(x, w, state, out, stateOut, B, L, C, K): causal depthwise conv1d with a carried
// state (see causal_conv1d.cc); state may be null (zeros).
napi_value CausalConv1d(napi_env env, napi_callback_info info) {
  Args args(env, info, "causalConv1d", 9);
  const Buffer x = args.buffer(0, "x"), w = args.buffer(1, "w");
  const Buffer state = args.buffer(2, "state", true);
  const Buffer out = args.buffer(3, "out"), state_out = args.buffer(4, "stateOut");
  const int64_t B = args.integer(5, "B"), L = args.integer(6, "L"), C = args.integer(7, "C");
  const int64_t K = args.integer(8, "K", 1);
  args.fits(x, kF32, {B, L, C});
  args.fits(w, kF32, {C, K});
  if (state.data) args.fits(state, kF32, {B, K - 1, C});
  args.fits(out, kF32, {B, L, C});
  args.fits(state_out, kF32, {B, K - 1, C});
  if (args.failed()) return nullptr;
  causal_conv1d(static_cast<const float*>(x.data), static_cast<const float*>(w.data),
                static_cast<const float*>(state.data), static_cast<float*>(out.data),
                static_cast<float*>(state_out.data), B, L, C, K);
  return undefined(env);
}

// gatedDeltaRule(q, k, v, g, beta, state, out, stateOut, B, L, H, Dk, Dv): the fused gated delta
// rule scan (see gated_delta.cc); state may be null (zeros).
napi_value GatedDeltaRule(napi_env env, napi_callback_info info) {
  Args args(env, info, "gatedDeltaRule", 13);
  const Buffer q = args.buffer(0, "q"), k = args.buffer(1, "k"), v = args.buffer(2, "v");
  const Buffer g = args.buffer(3, "g"), beta = args.buffer(4, "beta");
  const Buffer state = args.buffer(5, "state", true);
  const Buffer out = args.buffer(6, "out"), state_out = args.buffer(7, "stateOut");
  const int64_t B = args.integer(8, "B"), L = args.integer(9, "L"), H = args.integer(10, "H");
  const int64_t Dk = args.integer(11, "Dk"), Dv = args.integer(12, "Dv");
  args.fits(q, kF32, {B, L, H, Dk});
  args.fits(k, kF32, {B, L, H, Dk});
  args.fits(v, kF32, {B, L, H, Dv});
  args.fits(g, kF32, {B, L, H});
  args.fits(beta, kF32, {B, L, H});
  if (state.data) args.fits(state, kF32, {B, H, Dk, Dv});
  args.fits(out, kF32, {B, L, H, Dv});
  args.fits(state_out, kF32, {B, H, Dk, Dv});
  if (args.failed()) return nullptr;
  gated_delta_rule(static_cast<const float*>(q.data), static_cast<const float*>(k.data),
                   static_cast<const float*>(v.data), static_cast<const float*>(g.data),
                   static_cast<const float*>(beta.data), static_cast<const float*>(state.data),
                   static_cast<float*>(out.data), static_cast<float*>(state_out.data), B, L, H, Dk, Dv);
  return undefined(env);
}

// layerNorm(x, w, wDtype, b, bDtype, out, rows, n, eps): out = (x - mean) / sqrt(var + eps) * w + b.
napi_value LayerNorm(napi_env env, napi_callback_info info) {
  Args args(env, info, "layerNorm", 9);
  const Buffer x = args.buffer(0, "x");
  const Buffer w = args.buffer(1, "w", true);
  const int wdt = args.dtype(2, "wDtype");
  const Buffer b = args.buffer(3, "b", true);
  const int bdt = args.dtype(4, "bDtype");
  const Buffer out = args.buffer(5, "out");
  const int64_t rows = args.integer(6, "rows"), n = args.integer(7, "n");
  const double eps = args.number(8, "eps");
  if (w.data) {
    float_dtype(args, wdt, "wDtype");
    args.fits(w, wdt, {n});
  }
  if (b.data) {
    float_dtype(args, bdt, "bDtype");
    args.fits(b, bdt, {n});
  }
  args.fits(x, kF32, {rows, n});
  args.fits(out, kF32, {rows, n});
  if (args.failed()) return nullptr;
  layer_norm(static_cast<const float*>(x.data), w.data, wdt, b.data, bdt,
             static_cast<float*>(out.data), rows, n, static_cast<float>(eps));
  return undefined(env);
}

// rotary(x, cos, sin, out, B, L, H, D, R): rotate_half rotary embedding; out may alias x.
napi_value Rotary(napi_env env, napi_callback_info info) {
  Args args(env, info, "rotary", 9);
  const Buffer x = args.buffer(0, "x");
  const Buffer cos = args.buffer(1, "cos");
  const Buffer sin = args.buffer(2, "sin");
  const Buffer out = args.buffer(3, "out");
  const int64_t B = args.integer(4, "B"), L = args.integer(5, "L"), H = args.integer(6, "H");
  const int64_t D = args.integer(7, "D"), R = args.integer(8, "R");
  if (args.failed()) return nullptr;
  args.check(R % 2 == 0 && R <= D, false, "R = %lld must be even and <= D = %lld",
             static_cast<long long>(R), static_cast<long long>(D));
  args.fits(x, kF32, {B, L, H, D});
  args.fits(cos, kF32, {B, L, R});
  args.fits(sin, kF32, {B, L, R});
  args.fits(out, kF32, {B, L, H, D});
  if (args.failed()) return nullptr;
  rotary(static_cast<const float*>(x.data), static_cast<const float*>(cos.data),
         static_cast<const float*>(sin.data), static_cast<float*>(out.data), B, L, H, D, R);
  return undefined(env);
}

// embedding(table, tableDtype, V, ids, idsDtype, out, n, dim): out[i] = float32(table[ids[i]]).
napi_value Embedding(napi_env env, napi_callback_info info) {
  Args args(env, info, "embedding", 8);
  const Buffer table = args.buffer(0, "table");
  const int tdt = args.dtype(1, "tableDtype");
  const int64_t V = args.integer(2, "V");
  const Buffer ids = args.buffer(3, "ids");
  const int idt = args.dtype(4, "idsDtype");
  const Buffer out = args.buffer(5, "out");
  const int64_t n = args.integer(6, "n"), dim = args.integer(7, "dim");
  float_dtype(args, tdt, "tableDtype");
  args.check(idt == kI32 || idt == kI64, true, "idsDtype must be int32 or int64, got %s",
             dtype_name(idt));
  args.fits(table, tdt, {V, dim});
  args.fits(ids, idt, {n});
  args.fits(out, kF32, {n, dim});
  if (args.failed()) return nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = idt == kI32 ? static_cast<const int32_t*>(ids.data)[i]
                                   : static_cast<const int64_t*>(ids.data)[i];
    if (!args.check(id >= 0 && id < V, false, "id %lld at position %lld is out of range [0, %lld)",
                    static_cast<long long>(id), static_cast<long long>(i),
                    static_cast<long long>(V)))
      return nullptr;
  }
  embedding(table.data, tdt, ids.data, idt, static_cast<float*>(out.data), n, dim);
  return undefined(env);
}

// dequantMxfp4(blocks, scales, scaleRow, out, rows, nb): MXFP4 blocks (16 bytes of e2m1 codes per
// 32 values, low nibble first) times 2^(scale - 127) -> float32 [rows, nb * 32].
napi_value DequantMxfp4(napi_env env, napi_callback_info info) {
  Args args(env, info, "dequantMxfp4", 6);
  const Buffer blocks = args.buffer(0, "blocks");
  const Buffer scales = args.buffer(1, "scales");
  const int64_t scale_row = args.integer(2, "scaleRow");
  const Buffer out = args.buffer(3, "out");
  const int64_t rows = args.integer(4, "rows"), nb = args.integer(5, "nb");
  if (args.failed()) return nullptr;
  args.check(scale_row >= nb, false, "scaleRow %lld is shorter than nb = %lld",
             static_cast<long long>(scale_row), static_cast<long long>(nb));
  args.check(blocks.bytes >= static_cast<size_t>(rows * nb * 16), false, "argument 'blocks' holds %zu bytes, needs %lld",
             blocks.bytes, static_cast<long long>(rows * nb * 16));
  args.check(scales.bytes >= static_cast<size_t>(rows > 0 ? (rows - 1) * scale_row + nb : 0), false,
             "argument 'scales' holds %zu bytes, too few for %lld rows", scales.bytes, static_cast<long long>(rows));
  args.fits(out, kF32, {rows, nb * 32});
  if (args.failed()) return nullptr;
  dequant_mxfp4(static_cast<const uint8_t*>(blocks.data), static_cast<const uint8_t*>(scales.data), scale_row,
                static_cast<float*>(out.data), rows, nb);
  return undefined(env);
}


// quantizeBlocks(w, wDtype, bits, q, scales, N, K): w [N, K] (float) -> block-quantized q and
// float32 scales [N, K / 32] (quant_kernels.h); K a multiple of 32, bits 8 or 4.
napi_value QuantizeBlocks(napi_env env, napi_callback_info info) {
  Args args(env, info, "quantizeBlocks", 7);
  const Buffer w = args.buffer(0, "w");
  const int wdt = args.dtype(1, "wDtype");
  const int64_t bits = args.integer(2, "bits");
  const Buffer q = args.buffer(3, "q");
  const Buffer scales = args.buffer(4, "scales");
  const int64_t N = args.integer(5, "N"), K = args.integer(6, "K");
  if (args.failed()) return nullptr;
  float_dtype(args, wdt, "wDtype");
  args.check(bits == 8 || bits == 4, false, "bits must be 8 or 4, got %lld", static_cast<long long>(bits));
  args.check(K % 32 == 0, false, "K = %lld is not a multiple of 32", static_cast<long long>(K));
  if (args.failed()) return nullptr;
  args.fits(w, wdt, {N, K});
  args.check(q.bytes >= static_cast<size_t>(N * quant_row_bytes(static_cast<int>(bits), K)), false,
             "argument 'q' holds %zu bytes, too few for [%lld, %lld] at %lld bits", q.bytes,
             static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(bits));
  args.fits(scales, kF32, {N, K / 32});
  if (args.failed()) return nullptr;
  quantize_blocks(w.data, wdt, static_cast<int>(bits), static_cast<uint8_t*>(q.data),
                  static_cast<float*>(scales.data), N, K);
  return undefined(env);
}

// linearQuantizedGroup(x, bits, M, K, then per weight (2 or 3 of them; a third q of null: none)
// q, scales, bias, biasDtype, out, N): linearQuantized of one x with each weight, x quantized once
// and all the weights' rows in one pool job (decode's q/k/v and gate/up projections).
napi_value LinearQuantizedGroup(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearQuantizedGroup", 22);
  const Buffer x = args.buffer(0, "x");
  const int64_t bits = args.integer(1, "bits"), M = args.integer(2, "M"), K = args.integer(3, "K");
  if (args.failed()) return nullptr;
  args.check(bits == 8 || bits == 4, false, "bits must be 8 or 4, got %lld", static_cast<long long>(bits));
  args.check(K % 32 == 0, false, "K = %lld is not a multiple of 32", static_cast<long long>(K));
  args.fits(x, kF32, {M, K});
  QuantLinearPart parts[3];
  int nw = 0;
  for (int w = 0; w < 3 && !args.failed(); ++w) {
    const size_t a = 4 + 6 * w;
    const Buffer q = args.buffer(a, "q", w == 2);
    if (!q.given) break;  // a third q of null (an empty one, K = 0, is a weight)
    const Buffer scales = args.buffer(a + 1, "scales"), bias = args.buffer(a + 2, "bias", true);
    const int bdt = args.dtype(a + 3, "biasDtype");
    const Buffer out = args.buffer(a + 4, "out");
    const int64_t N = args.integer(a + 5, "N");
    if (args.failed()) return nullptr;
    if (bias.data) {
      float_dtype(args, bdt, "biasDtype");
      args.fits(bias, bdt, {N});
    }
    args.check(q.bytes >= static_cast<size_t>(N * quant_row_bytes(static_cast<int>(bits), K)), false,
               "argument 'q' of weight %d holds %zu bytes, too few for [%lld, %lld] at %lld bits", w, q.bytes,
               static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(bits));
    args.fits(scales, kF32, {N, K / 32});
    args.fits(out, kF32, {M, N});
    parts[nw++] = QuantLinearPart{static_cast<const uint8_t*>(q.data), static_cast<const float*>(scales.data),
                                  bias.data, bdt, static_cast<float*>(out.data), N};
  }
  if (args.failed()) return nullptr;
  linear_quantized_group(static_cast<const float*>(x.data), static_cast<int>(bits), M, K, parts, nw);
  return undefined(env);
}

// linearQuantized(x, q, scales, bits, bias, biasDtype, out, M, N, K): out = x @ W^T + bias, W
// block-quantized (quant_kernels.h).
napi_value LinearQuantized(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearQuantized", 10);
  const Buffer x = args.buffer(0, "x");
  const Buffer q = args.buffer(1, "q");
  const Buffer scales = args.buffer(2, "scales");
  const int64_t bits = args.integer(3, "bits");
  const Buffer bias = args.buffer(4, "bias", true);
  const int bdt = args.dtype(5, "biasDtype");
  const Buffer out = args.buffer(6, "out");
  const int64_t M = args.integer(7, "M"), N = args.integer(8, "N"), K = args.integer(9, "K");
  if (args.failed()) return nullptr;
  args.check(bits == 8 || bits == 4, false, "bits must be 8 or 4, got %lld", static_cast<long long>(bits));
  args.check(K % 32 == 0, false, "K = %lld is not a multiple of 32", static_cast<long long>(K));
  if (args.failed()) return nullptr;
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(x, kF32, {M, K});
  args.check(q.bytes >= static_cast<size_t>(N * quant_row_bytes(static_cast<int>(bits), K)), false,
             "argument 'q' holds %zu bytes, too few for [%lld, %lld] at %lld bits", q.bytes,
             static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(bits));
  args.fits(scales, kF32, {N, K / 32});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  linear_quantized(static_cast<const float*>(x.data), static_cast<const uint8_t*>(q.data),
                   static_cast<const float*>(scales.data), static_cast<int>(bits), bias.data, bdt,
                   static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

// linearPackedInt(x, qweight, qzeros, scales, gIdx, bits, awq, zeroOffset, bias, biasDtype, out,
// M, N, K, G): out = x @ W^T + bias, W a GPTQ / AWQ packed weight with G groups (ops.h).
napi_value LinearPackedInt(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearPackedInt", 15);
  const Buffer x = args.buffer(0, "x");
  const Buffer qweight = args.buffer(1, "qweight");
  const Buffer qzeros = args.buffer(2, "qzeros");
  const Buffer scales = args.buffer(3, "scales");
  const Buffer gidx = args.buffer(4, "gIdx");
  const int64_t bits = args.integer(5, "bits");
  const int64_t awq = args.integer(6, "awq", 0, 1);
  const int64_t zero_offset = args.integer(7, "zeroOffset", 0, 1);
  const Buffer bias = args.buffer(8, "bias", true);
  const int bdt = args.dtype(9, "biasDtype");
  const Buffer out = args.buffer(10, "out");
  const int64_t M = args.integer(11, "M"), N = args.integer(12, "N"), K = args.integer(13, "K");
  const int64_t G = args.integer(14, "G");
  if (args.failed()) return nullptr;
  args.check(bits == 4 || (bits == 8 && !awq), false, "bits must be 4 (GPTQ, AWQ) or 8 (GPTQ), got %lld",
             static_cast<long long>(bits));
  if (args.failed()) return nullptr;
  const int64_t per = 32 / bits;
  args.check(N % per == 0 && (awq || K % per == 0), false, "N = %lld and K = %lld must be multiples of %lld",
             static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(per));
  if (args.failed()) return nullptr;
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(x, kF32, {M, K});
  args.fits(qweight, kI32, awq ? std::vector<int64_t>{K, N / per} : std::vector<int64_t>{K / per, N});
  args.fits(qzeros, kI32, {G, N / per});
  args.fits(scales, kF32, {G, N});
  args.fits(gidx, kI32, {K});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  const int32_t* g = static_cast<const int32_t*>(gidx.data);
  for (int64_t k = 0; k < K; ++k)
    if (!args.check(g[k] >= 0 && g[k] < G, false, "g_idx[%lld] = %d is not a group in [0, %lld)",
                    static_cast<long long>(k), g[k], static_cast<long long>(G)))
      return nullptr;
  linear_packed_int(static_cast<const float*>(x.data), static_cast<const int32_t*>(qweight.data),
                    static_cast<const int32_t*>(qzeros.data), static_cast<const float*>(scales.data), g,
                    static_cast<int>(bits), awq != 0, static_cast<int>(zero_offset), bias.data, bdt,
                    static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

// linearFp8Block(x, weight, scaleInv, blockN, blockK, bias, biasDtype, out, M, N, K): out = x @ W^T
// + bias, W float8_e4m3fn bytes [N, K] scaled per [blockN, blockK] block (ops.h).
napi_value LinearFp8Block(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearFp8Block", 11);
  const Buffer x = args.buffer(0, "x");
  const Buffer weight = args.buffer(1, "weight");
  const Buffer scale_inv = args.buffer(2, "scaleInv");
  const int64_t bn = args.integer(3, "blockN", 1), bk = args.integer(4, "blockK", 1);
  const Buffer bias = args.buffer(5, "bias", true);
  const int bdt = args.dtype(6, "biasDtype");
  const Buffer out = args.buffer(7, "out");
  const int64_t M = args.integer(8, "M"), N = args.integer(9, "N"), K = args.integer(10, "K");
  if (args.failed()) return nullptr;
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(x, kF32, {M, K});
  args.check(weight.bytes >= static_cast<size_t>(N * K), false, "argument 'weight' holds %zu bytes, needs %lld",
             weight.bytes, static_cast<long long>(N * K));
  args.fits(scale_inv, kF32, {(N + bn - 1) / bn, (K + bk - 1) / bk});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  linear_fp8_block(static_cast<const float*>(x.data), static_cast<const uint8_t*>(weight.data),
                   static_cast<const float*>(scale_inv.data), bn, bk, bias.data, bdt,
                   static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

// sort(x, outValues, outIndices, rows, n, descending): stable row-wise sort with indices.
napi_value Sort(napi_env env, napi_callback_info info) {
  Args args(env, info, "sort", 6);
  const Buffer x = args.buffer(0, "x");
  const Buffer values = args.buffer(1, "outValues");
  const Buffer indices = args.buffer(2, "outIndices");
  const int64_t rows = args.integer(3, "rows"), n = args.integer(4, "n");
  const int64_t descending = args.integer(5, "descending", 0, 1);
  args.fits(x, kF32, {rows, n});
  args.fits(values, kF32, {rows, n});
  args.fits(indices, kI64, {rows, n});
  if (args.failed()) return nullptr;
  sort(static_cast<const float*>(x.data), static_cast<float*>(values.data),
       static_cast<int64_t*>(indices.data), rows, n, descending != 0);
  return undefined(env);
}

// topk(x, outValues, outIndices, rows, n, k): the k largest per row, largest first.
napi_value Topk(napi_env env, napi_callback_info info) {
  Args args(env, info, "topk", 6);
  const Buffer x = args.buffer(0, "x");
  const Buffer values = args.buffer(1, "outValues");
  const Buffer indices = args.buffer(2, "outIndices");
  const int64_t rows = args.integer(3, "rows"), n = args.integer(4, "n");
  const int64_t k = args.integer(5, "k");
  args.check(k <= n, false, "k = %lld is larger than n = %lld", static_cast<long long>(k),
             static_cast<long long>(n));
  args.fits(x, kF32, {rows, n});
  args.fits(values, kF32, {rows, k});
  args.fits(indices, kI64, {rows, k});
  if (args.failed()) return nullptr;
  topk(static_cast<const float*>(x.data), static_cast<float*>(values.data),
       static_cast<int64_t*>(indices.data), rows, n, k);
  return undefined(env);
}

}  // namespace

}  // namespace tsorch

NAPI_MODULE_INIT() {
  using namespace tsorch;
  const napi_property_descriptor props[] = {
      {"numThreads", nullptr, NumThreads, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cpuFeatures", nullptr, CpuFeatures, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"readBandwidth", nullptr, ReadBandwidth, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"decodeReadBandwidth", nullptr, DecodeReadBandwidth, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"decodeComputeRate", nullptr, DecodeComputeRate, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"hostStalls", nullptr, HostStalls, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"readBandwidthInCalls", nullptr, ReadBandwidthInCalls, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"allocateHuge", nullptr, AllocateHuge, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"muteStderr", nullptr, MuteStderr, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"restoreStderr", nullptr, RestoreStderr, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"copy", nullptr, Copy, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"unary", nullptr, Unary, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"binary", nullptr, Binary, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"fusedElementwise", nullptr, FusedElementwise, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"where", nullptr, Where, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"reduce", nullptr, Reduce, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cumsum", nullptr, Cumsum, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"softmax", nullptr, Softmax, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linear", nullptr, Linear, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"gatherLinear", nullptr, GatherLinear, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"moeExperts", nullptr, MoeExperts, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"matmul", nullptr, Matmul, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sdpa", nullptr, Sdpa, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"causalConv1d", nullptr, CausalConv1d, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"gatedDeltaRule", nullptr, GatedDeltaRule, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"pagedKVWrite", nullptr, PagedKVWrite, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"pagedAttention", nullptr, PagedAttention, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"rmsNorm", nullptr, RmsNorm, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"layerNorm", nullptr, LayerNorm, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"rotary", nullptr, Rotary, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"embedding", nullptr, Embedding, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"dequantMxfp4", nullptr, DequantMxfp4, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"quantizeBlocks", nullptr, QuantizeBlocks, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearQuantized", nullptr, LinearQuantized, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearQuantizedGroup", nullptr, LinearQuantizedGroup, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearPackedInt", nullptr, LinearPackedInt, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearFp8Block", nullptr, LinearFp8Block, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"sort", nullptr, Sort, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"topk", nullptr, Topk, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"mapRegions", nullptr, MapRegions, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"conv2d", nullptr, Conv2dExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"groupNorm", nullptr, GroupNormExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"upsampleNearest2d", nullptr, UpsampleNearest2dExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearAdd", nullptr, LinearAddExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearGroup", nullptr, LinearGroupExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"rotaryKVWrite", nullptr, RotaryKVWriteExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"decodeAttention", nullptr, DecodeAttentionExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"linearArgmax", nullptr, LinearArgmaxExport, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  register_graph_kernels(props, sizeof(props) / sizeof(props[0]));
  const napi_property_descriptor graph_props[] = {
      {"graphCreate", nullptr, graph_create, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"graphRun", nullptr, graph_run, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, 2, graph_props);
  return exports;
}
