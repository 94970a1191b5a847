// Row-wise sort and top-k. NaN orders above every number, as in PyTorch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

struct Entry {
  float v;
  int64_t i;
};

// a strictly above b in value (NaN highest); equal values compare false.
inline bool above(float a, float b) {
  const bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) return an && !bn;
  return a > b;
}

// Loads row r of x into a per-thread buffer of (value, index) entries.
std::vector<Entry>& load_row(const float* x, int64_t r, int64_t n) {
  thread_local std::vector<Entry> row;
  row.resize(n);
  for (int64_t i = 0; i < n; ++i) row[i] = Entry{x[r * n + i], i};
  return row;
}

}  // namespace

// Stable sort of each row of contiguous float32 [rows, n], ascending or descending.
void sort(const float* x, float* values, int64_t* indices, int64_t rows, int64_t n,
          bool descending) {
  const double cost = 8.0 * n * (1 + std::log2(static_cast<double>(n) + 1));
  parallel_rows(rows, cost, [&](int64_t r) {
    std::vector<Entry>& row = load_row(x, r, n);
    if (descending)
      std::stable_sort(row.begin(), row.end(), [](const Entry& a, const Entry& b) { return above(a.v, b.v); });
    else
      std::stable_sort(row.begin(), row.end(), [](const Entry& a, const Entry& b) { return above(b.v, a.v); });
    for (int64_t i = 0; i < n; ++i) {
      values[r * n + i] = row[i].v;
      indices[r * n + i] = row[i].i;
    }
  });
}

// The k largest of each row (largest first, ties by lower index), k <= n.
void topk(const float* x, float* values, int64_t* indices, int64_t rows, int64_t n, int64_t k) {
  const auto better = [](const Entry& a, const Entry& b) {
    if (above(a.v, b.v)) return true;
    if (above(b.v, a.v)) return false;
    return a.i < b.i;
  };
  parallel_rows(rows, 8.0 * n, [&](int64_t r) {
    std::vector<Entry>& row = load_row(x, r, n);
    if (k < n) std::nth_element(row.begin(), row.begin() + k, row.end(), better);
    std::sort(row.begin(), row.begin() + k, better);
    for (int64_t i = 0; i < k; ++i) {
      values[r * k + i] = row[i].v;
      indices[r * k + i] = row[i].i;
    }
  });
}

}  // namespace tsorch
