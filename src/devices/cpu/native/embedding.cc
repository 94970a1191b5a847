// Embedding lookup (table rows gathered and converted to float32).
#include <cstring>

#include "dtype.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

// out[i, :] = float32(table[ids[i], :]); addon.cc has checked every id against V.
void embedding(const void* table, int table_dtype, const void* ids, int ids_dtype, float* out,
               int64_t n, int64_t dim) {
  const int esize = dtype_size(table_dtype);
  parallel_rows(n, 2.0 * dim, [&](int64_t i) {
    const int64_t id = ids_dtype == kI32 ? static_cast<const int32_t*>(ids)[i]
                                         : static_cast<const int64_t*>(ids)[i];
    const void* row = static_cast<const char*>(table) + id * dim * esize;
    float* o = out + i * dim;
    if (table_dtype == kF32) {
      std::memcpy(o, row, dim * sizeof(float));
    } else {
      for (int64_t j = 0; j < dim; ++j) o[j] = load_float(row, table_dtype, j);
    }
  });
}

}  // namespace tsorch
