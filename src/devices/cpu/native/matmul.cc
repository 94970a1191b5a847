// matmul: batched float32 matrix product with arbitrary strides.
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

// out[b, m, n] = sum_k a[b*as0 + m*as1 + k*as2] * b[b*bs0 + k*bs1 + n*bs2]; out contiguous.
void matmul(const float* a, const int64_t as[3], const float* b, const int64_t bs[3], float* out,
            int64_t batch, int64_t M, int64_t N, int64_t K) {
  // The kernels read rows of A contiguous in k; gather A first when they are not.
  std::vector<float> packed;
  int64_t a_batch = as[0], lda = as[1];
  if (as[2] != 1 && K > 1) {
    packed.resize(batch * M * K);
    copy(a, kF32, {as[0], as[1], as[2]}, packed.data(), kF32, {M * K, K, 1}, {batch, M, K});
    a = packed.data();
    a_batch = M * K;
    lda = K;
  }
  const auto one = [&](int64_t i, bool parallel) {
    const BMatrix B{b + i * bs[0], kF32, bs[1], bs[2]};
    if (parallel) gemm_parallel(a + i * a_batch, lda, M, K, B, nullptr, out + i * M * N, N, N);
    else gemm_range(a + i * a_batch, lda, M, K, B, nullptr, out + i * M * N, N, 0, N);
  };
  if (batch >= ThreadPool::get().size()) {
    parallel_rows(batch, 2.0 * M * N * K, [&](int64_t i) { one(i, false); });
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i, true);
  }
}

}  // namespace tsorch
