// Rows grouped by expert and one parallel region for every expert's GEMM: the core of
// gather_linear.cc (gatherLinear) and moe_experts.cc (moeExperts).
#pragma once

#include <cstdint>
#include <vector>

namespace tsorch {

// Rows counting-sorted by expert: sorted rows start[e] .. start[e+1] belong to expert e;
// perm[sorted row] = original row; active lists the experts with rows, ascending.
struct ExpertGroups {
  std::vector<int64_t> start, perm, active;
};

// idx int64 [M] with 0 <= idx[m] < E (checked by the caller).
ExpertGroups group_by_expert(const int64_t* idx, int64_t M, int64_t E);

// For every active expert e and sorted row r of it: ys[r*ldy + n] = xs[r*lda + :] . w[e][n*K + :]
// for n < N (w[e] an [N, K] matrix of w_dtype), all experts' GEMMs in one parallel region
// (tasks = (expert, column block)); with bfloat16 weights an expert's rows go in chunks of at most
// 8, the bf16 GEMM's cheapest block shape. Runs on the thread pool; uses thread_scratch slots 0
// and 3 only.
void grouped_gemm(const ExpertGroups& g, const float* xs, int64_t lda, const void* const* w, int w_dtype,
                  float* ys, int64_t ldy, int64_t N, int64_t K);

}  // namespace tsorch
