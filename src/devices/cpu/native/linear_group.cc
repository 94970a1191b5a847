// linearGroup on cpu (compile's linear grouping, src/compile/passes/linear_group.ts): up to three
// linears sharing one input, the input RMS-normalized first, as one job on the thread pool.
//
// The norm runs once (rms_norm, the eager kernel) into a buffer of the calling thread. For few
// rows (the direct GEMV kernels: a decode step) every weight's column panels are split over the
// pool in ONE job (parallel_ranges over all of them), where separate linears were a job each: the
// threads stream q, k and v (or gate and up) back to back with one join instead of three. With an
// epilogue (a fused elementwise chain of the products, SiLU(gate) * up), the products are computed
// the same way into a buffer of the calling thread and the chain then runs over every column
// (epilogue_all: a slice of the columns per thread for a row or two, column pieces over the pool
// for more). Each column is computed by the same kernel as an eager linear (gemm_range, the panels
// gemm_direct_granule() columns, as gemm_parallel splits), and the norm and the chain by the eager
// rms_norm and fused_elementwise's loops (fused_elementwise_contiguous), so the results equal the
// unfused ops' exactly. More rows (prefill: the packed / bf16 GEMMs) run each product with
// gemm_parallel, then epilogue_all. Block-quantized weights (FusedWeight) run the same way through
// linear_quantized's kernels (FusedProducts): the input quantized once per call, the panels its
// row chunks (quant_rows_prepare: 24 rows with the integer kernels, else 16), the results again
// the eager ones.
#include <algorithm>
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "napi_args.h"
#include "ops.h"
#include "quant_kernels.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// The chain of `a.prog` over columns [n0, n1) of the products (row stride N) into `out`.
void epilogue_columns(const LinearGroupArgs& a, float* const* products, int64_t n0, int64_t n1) {
  const int64_t N = a.w[0].N;
  for (int64_t m = 0; m < a.M; ++m) {
    const float* in[kMaxFusedInputs] = {};
    for (int g = 0; g < a.G; ++g) in[g] = products[g] + m * N + n0;
    fused_elementwise_contiguous(a.prog, a.nsteps, in, a.out[0] + m * N + n0, n1 - n0);
  }
}

// The chain of `a.prog` over every column, once all products are done: column pieces over the pool
// for prefill rows; for a decode row or two, one slice of the columns per thread. (On the calling
// thread alone, SiLU * up over 3072 columns took 7-8 us inside a decode step, ~2 us in a loop: the
// products the other core computed arrive one cache line at a time. Split, the Qwen3-0.6B-shaped
// gate/up call took 3-4% less time, int4 and int8, AMD EPYC Zen 5, 2 threads. Under 256 columns
// a thread (tiny models) the calling thread still runs them all.)
void epilogue_all(const LinearGroupArgs& a, float* const* products) {
  const int64_t N = a.w[0].N, piece = 256;
  ThreadPool& pool = ThreadPool::get();
  if (a.M <= 2 && pool.size() > 1 && N >= piece * pool.size()) {
    const int64_t T = pool.size();
    pool.parallel_for(T, [&](int64_t t) { epilogue_columns(a, products, N * t / T, N * (t + 1) / T); });
    return;
  }
  parallel_rows((N + piece - 1) / piece, 2.0 * a.M * piece * a.nsteps, [&](int64_t p) {
    epilogue_columns(a, products, p * piece, std::min(N, (p + 1) * piece));
  });
}

}  // namespace

const float* normed_rows(const NormedInput& in, std::vector<float>& scratch) {
  if (!in.norm_w) return in.x;
  scratch.resize(static_cast<size_t>(in.M * in.K));
  rms_norm(in.x, in.norm_w, in.norm_dtype, scratch.data(), in.M, in.K, in.eps, in.offset);
  return scratch.data();
}

bool read_normed_input(Args& args, NormedInput* in) {
  const Buffer x = args.buffer(0, "x");
  in->M = args.integer(1, "M");
  in->K = args.integer(2, "K");
  const Buffer norm = args.buffer(3, "normW", true);
  in->norm_dtype = args.dtype(4, "normDtype");
  in->eps = static_cast<float>(args.number(5, "eps"));
  in->offset = static_cast<float>(args.number(6, "offset"));
  if (args.failed()) return false;
  args.fits(x, kF32, {in->M, in->K});
  if (norm.data) {
    float_dtype(args, in->norm_dtype, "normDtype");
    args.fits(norm, in->norm_dtype, {in->K});
  }
  in->x = static_cast<const float*>(x.data);
  in->norm_w = norm.data;
  return !args.failed();
}

FusedProducts::FusedProducts(const float* x, int64_t M, int64_t K, const FusedWeight* ws, int G)
    : x_(x), M_(M), K_(K), ws_(ws) {
  if (ws[0].bits) {
    direct_ = quant_rows_prepare(x, ws[0].bits, M, K, &rows_);
    granule_ = rows_.chunk;
    return;
  }
  for (int g = 0; g < G; ++g) direct_ = direct_ && gemm_direct(M, BMatrix{ws[g].w, ws[g].dtype, 1, K, true});
  granule_ = gemm_direct_granule();
}

void FusedProducts::range(int g, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) const {
  const FusedWeight& w = ws_[g];
  if (w.bits) quant_rows(rows_, static_cast<const uint8_t*>(w.w), w.scales, bias, C, ldc, n0, n1);
  else gemm_range(x_, K_, M_, K_, BMatrix{w.w, w.dtype, 1, K_, true}, bias, C, ldc, n0, n1);
}

void FusedProducts::whole(int g, const float* bias, float* C) const {
  const FusedWeight& w = ws_[g];
  if (w.bits) linear_quantized(x_, static_cast<const uint8_t*>(w.w), w.scales, w.bits, bias, kF32, C, M_, w.N, K_);
  else gemm_parallel(x_, K_, M_, K_, BMatrix{w.w, w.dtype, 1, K_, true}, bias, C, w.N, w.N);
}

bool read_fused_weight(Args& args, size_t iw, size_t is, size_t ib, int64_t N, int64_t K, FusedWeight* w) {
  const Buffer data = args.buffer(iw, "w");
  w->dtype = args.dtype(iw + 1, "wDtype");
  const Buffer scales = args.buffer(is, "scales", true);
  w->bits = static_cast<int>(args.integer(ib, "bits", 0, 8));
  w->N = N;
  if (args.failed()) return false;
  if (w->bits == 0) {
    float_dtype(args, w->dtype, "wDtype");
    args.fits(data, w->dtype, {N, K});
  } else {
    args.check(w->bits == 8 || w->bits == 4, false, "bits must be 8 or 4 (0: a float weight), got %d", w->bits);
    args.check(K % 32 == 0, false, "K = %lld is not a multiple of 32", static_cast<long long>(K));
    if (args.failed()) return false;
    args.check(data.bytes >= static_cast<size_t>(N * quant_row_bytes(w->bits, K)), false,
               "argument 'w' holds %zu bytes, too few for [%lld, %lld] at %d bits", data.bytes,
               static_cast<long long>(N), static_cast<long long>(K), w->bits);
    args.fits(scales, kF32, {N, K / 32});
    w->scales = static_cast<const float*>(scales.data);
  }
  w->w = data.data;
  return !args.failed();
}

void linear_group(const LinearGroupArgs& a) {
  thread_local std::vector<float> normed;
  const float* x = normed_rows(a, normed);
  const FusedProducts products(x, a.M, a.K, a.w, a.G);
  // With an epilogue the products go to a buffer of the calling thread (each task writes its columns).
  thread_local std::vector<float> scratch;
  float* outs[3] = {a.out[0], a.out[1], a.out[2]};
  if (a.prog) {
    scratch.resize(static_cast<size_t>(a.G * a.M * a.w[0].N));
    for (int g = 0; g < a.G; ++g) outs[g] = scratch.data() + g * a.M * a.w[0].N;
  }
  const int64_t panel = products.granule();
  if (!products.direct()) {
    for (int g = 0; g < a.G; ++g) products.whole(g, nullptr, outs[g]);
    if (a.prog) epilogue_all(a, outs);
    return;
  }
  // One contiguous range of panels per thread over all the products' panels in one numbering
  // (parallel_ranges, as linear_quantized_group splits), so that each thread streams one weight
  // front to back; with an epilogue, the chain then runs over every column. (Pieces of columns
  // shared by the products, gate then up rows of each piece, restarted the weight streams every
  // piece: the Qwen3-0.6B-shaped int4 gate/up GEMV took 117-141 us against 94-112 without the
  // epilogue, bf16 293-330 us against 276-291, AMD EPYC Zen 5, 2 threads.)
  int64_t first[4] = {0, 0, 0, 0};
  for (int g = 0; g < a.G; ++g) first[g + 1] = first[g] + (a.w[g].N + panel - 1) / panel;
  parallel_ranges(first[a.G], 2.0 * a.M * panel * a.K, [&](int64_t c0, int64_t c1) {
    for (int g = 0; g < a.G; ++g) {
      const int64_t lo = std::max(c0, first[g]), hi = std::min(c1, first[g + 1]);
      if (lo >= hi) continue;
      const int64_t N = a.w[g].N;
      products.range(g, nullptr, outs[g], N, std::min(N, (lo - first[g]) * panel), std::min(N, (hi - first[g]) * panel));
    }
  });
  if (a.prog) epilogue_all(a, outs);
}

// linearGroup(x, M, K, normW, normDtype, eps, offset, G, w0, w0Dtype, N0, out0, w1, w1Dtype, N1,
// out1, w2, w2Dtype, N2, out2, prog, nsteps, scales0, scales1, scales2, bits): outs[g] = norm(x)
// @ w_g^T (normW null: no norm); bits 0: float weights of their dtypes (scales null), bits 8 / 4:
// block-quantized weights (w_g the codes, scales_g float32 [N_g, K / 32]; dtypes unused); with
// prog (a fusedElementwise program over inputs 0..G-1), every N equal and out0 [M, N] the chain's
// value of the products (out1, out2 null).
napi_value LinearGroupExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearGroup", 26);
  LinearGroupArgs a;
  if (!read_normed_input(args, &a)) return nullptr;
  a.G = static_cast<int>(args.integer(7, "G", 1, 3));
  const Buffer prog = args.buffer(20, "prog", true);
  Buffer out[3];
  for (int g = 0; g < 3; ++g) out[g] = args.buffer(11 + 4 * g, "out", g >= a.G || (prog.data && g > 0));
  a.nsteps = static_cast<int>(args.integer(21, "nsteps", 0, 4096));
  if (args.failed()) return nullptr;
  for (int g = 0; g < a.G; ++g) {
    if (!read_fused_weight(args, 8 + 4 * g, 22 + g, 25, args.integer(10 + 4 * g, "N"), a.K, &a.w[g])) return nullptr;
    if (prog.data) args.check(a.w[g].N == a.w[0].N, false, "linearGroup: weights of an epilogue group differ in rows (%lld, %lld)", static_cast<long long>(a.w[g].N), static_cast<long long>(a.w[0].N));
    else args.fits(out[g], kF32, {a.M, a.w[g].N});
  }
  if (prog.data) {
    args.fits(out[0], kF32, {a.M, a.w[0].N});
    args.check(a.nsteps >= 1 && prog.bytes >= static_cast<size_t>(a.nsteps) * 6 * 4, false, "linearGroup: prog holds fewer than %d steps", a.nsteps);
    const int32_t* p = static_cast<const int32_t*>(prog.data);
    for (int s = 0; s < a.nsteps && !args.failed(); ++s) {
      const int32_t* q = p + s * 6;
      const bool unary_step = q[0] == 0;
      bool ok = (q[0] == 0 || q[0] == 1) && q[1] >= 0 && q[1] < (unary_step ? static_cast<int>(kNumUnary) : static_cast<int>(kPow) + 1);
      for (int o = 0; o < (unary_step ? 1 : 2) && ok; ++o) {
        const int kind = q[2 + 2 * o], idx = q[3 + 2 * o];
        ok = (kind == 0 && idx >= 0 && idx < a.G) || (kind == 1 && idx >= 0 && idx < s);
      }
      args.check(ok, false, "linearGroup: epilogue step %d is malformed", s);
    }
  }
  if (args.failed()) return nullptr;
  for (int g = 0; g < a.G; ++g) a.out[g] = static_cast<float*>(out[g].data);
  a.prog = static_cast<const int32_t*>(prog.data);
  linear_group(a);
  return undefined(env);
}

}  // namespace tsorch
