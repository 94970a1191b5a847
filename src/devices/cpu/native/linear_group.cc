// linearGroup on cpu (compile's linear grouping, src/compile/passes/linear_group.ts): up to three
// linears sharing one input, the input RMS-normalized first, as one job on the thread pool.
//
// The norm runs once (rms_norm, the eager kernel) into a buffer of the calling thread. For few
// rows (the direct GEMV kernels: a decode step) every weight's column panels are the tasks of ONE
// pool job, where separate linears were a job each: the threads stream q, k and v (or gate and up)
// back to back with one join instead of three. With an epilogue (a fused elementwise chain of the
// products, SiLU(gate) * up), a task computes its columns of every product and applies the chain
// to them while they are in cache. Each column is computed by the same kernel as an eager linear
// (gemm_range), and the norm and the chain by the eager rms_norm and fused_elementwise, so the
// results equal the unfused ops' exactly. More rows (prefill: the packed / bf16 GEMMs) run each
// product with gemm_parallel and the chain over the whole products afterwards.
#include <algorithm>
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "napi_args.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// Tasks per thread for one weight (as gemm_parallel's direct split: a late thread holds up less).
constexpr int64_t kTasksPerThread = 4;

// The chain of `a.prog` over columns [n0, n1) of the products (row stride N) into `out`.
void epilogue_columns(const LinearGroupArgs& a, float* const* products, int64_t n0, int64_t n1) {
  const int64_t N = a.N[0];
  const Dims shape{n1 - n0};
  const Dims unit[kMaxFusedInputs] = {{1}, {1}, {1}, {1}, {1}, {1}};
  for (int64_t m = 0; m < a.M; ++m) {
    const float* in[kMaxFusedInputs] = {};
    for (int g = 0; g < a.G; ++g) in[g] = products[g] + m * N + n0;
    fused_elementwise(a.prog, a.nsteps, in, unit, a.G, a.out[0] + m * N + n0, shape);
  }
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

void linear_group(const LinearGroupArgs& a) {
  thread_local std::vector<float> normed;
  const float* x = normed_rows(a, normed);
  BMatrix B[3];
  bool direct = true;
  for (int g = 0; g < a.G; ++g) {
    B[g] = BMatrix{a.w[g], a.w_dtype[g], 1, a.K, true};
    direct = direct && gemm_direct(a.M, B[g]);
  }
  // With an epilogue the products go to a buffer of the calling thread (each task writes its columns).
  thread_local std::vector<float> scratch;
  float* products[3] = {a.out[0], a.out[1], a.out[2]};
  if (a.prog) {
    scratch.resize(static_cast<size_t>(a.G * a.M * a.N[0]));
    for (int g = 0; g < a.G; ++g) products[g] = scratch.data() + g * a.M * a.N[0];
  }
  ThreadPool& pool = ThreadPool::get();
  const int64_t panel = gemm_panel();
  if (!direct) {
    for (int g = 0; g < a.G; ++g) gemm_parallel(x, a.K, a.M, a.K, B[g], nullptr, products[g], a.N[g], a.N[g]);
    if (a.prog) {
      const Dims shape{a.M, a.N[0]};
      const Dims strides[kMaxFusedInputs] = {{a.N[0], 1}, {a.N[0], 1}, {a.N[0], 1}, {a.N[0], 1}, {a.N[0], 1}, {a.N[0], 1}};
      const float* in[kMaxFusedInputs] = {products[0], products[1], products[2]};
      fused_elementwise(a.prog, a.nsteps, in, strides, a.G, a.out[0], shape);
    }
    return;
  }
  if (a.prog) {
    // Tasks are column ranges of N shared by all products.
    const int64_t N = a.N[0], panels = (N + panel - 1) / panel;
    const int64_t threads = split_count(2.0 * a.G * a.M * N * a.K, pool.size());
    const int64_t tasks = std::max<int64_t>(1, std::min(panels, threads * kTasksPerThread));
    pool.parallel_for(tasks, [&](int64_t t) {
      const int64_t n0 = std::min(N, panels * t / tasks * panel), n1 = std::min(N, panels * (t + 1) / tasks * panel);
      for (int g = 0; g < a.G; ++g) gemm_range(x, a.K, a.M, a.K, B[g], nullptr, products[g], N, n0, n1);
      epilogue_columns(a, products, n0, n1);
    });
    return;
  }
  // Tasks are (weight, column range) pairs, each weight cut as gemm_parallel would.
  int64_t first[4] = {0, 0, 0, 0}, cuts[3] = {1, 1, 1};
  for (int g = 0; g < a.G; ++g) {
    const int64_t panels = (a.N[g] + panel - 1) / panel;
    const int64_t threads = split_count(2.0 * a.M * a.N[g] * a.K, pool.size());
    cuts[g] = std::max<int64_t>(1, std::min(panels, threads * kTasksPerThread));
    first[g + 1] = first[g] + cuts[g];
  }
  pool.parallel_for(first[a.G], [&](int64_t t) {
    int g = 0;
    while (t >= first[g + 1]) ++g;
    const int64_t c = t - first[g], N = a.N[g], panels = (N + panel - 1) / panel;
    const int64_t n0 = std::min(N, panels * c / cuts[g] * panel), n1 = std::min(N, panels * (c + 1) / cuts[g] * panel);
    gemm_range(x, a.K, a.M, a.K, B[g], nullptr, products[g], N, n0, n1);
  });
}

// linearGroup(x, M, K, normW, normDtype, eps, offset, G, w0, w0Dtype, N0, out0, w1, w1Dtype, N1,
// out1, w2, w2Dtype, N2, out2, prog, nsteps): outs[g] = norm(x) @ w_g^T (normW null: no norm);
// with prog (a fusedElementwise program over inputs 0..G-1), every N equal and out0 [M, N] the
// chain's value of the products (out1, out2 null).
napi_value LinearGroupExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearGroup", 22);
  LinearGroupArgs a;
  if (!read_normed_input(args, &a)) return nullptr;
  a.G = static_cast<int>(args.integer(7, "G", 1, 3));
  const Buffer prog = args.buffer(20, "prog", true);
  Buffer w[3], out[3];
  for (int g = 0; g < 3; ++g) {
    w[g] = args.buffer(8 + 4 * g, "w", g >= a.G);
    a.w_dtype[g] = args.dtype(9 + 4 * g, "wDtype");
    a.N[g] = args.integer(10 + 4 * g, "N");
    out[g] = args.buffer(11 + 4 * g, "out", g >= a.G || (prog.data && g > 0));
  }
  a.nsteps = static_cast<int>(args.integer(21, "nsteps", 0, 4096));
  if (args.failed()) return nullptr;
  for (int g = 0; g < a.G; ++g) {
    float_dtype(args, a.w_dtype[g], "wDtype");
    args.fits(w[g], a.w_dtype[g], {a.N[g], a.K});
    if (prog.data) args.check(a.N[g] == a.N[0], false, "linearGroup: weights of an epilogue group differ in rows (%lld, %lld)", static_cast<long long>(a.N[g]), static_cast<long long>(a.N[0]));
    else args.fits(out[g], kF32, {a.M, a.N[g]});
  }
  if (prog.data) {
    args.fits(out[0], kF32, {a.M, a.N[0]});
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
  for (int g = 0; g < a.G; ++g) {
    a.w[g] = w[g].data;
    a.out[g] = static_cast<float*>(out[g].data);
  }
  a.prog = static_cast<const int32_t*>(prog.data);
  linear_group(a);
  return undefined(env);
}

}  // namespace tsorch
