// Iteration over N strided operands sharing one shape (copy, binary, where), in parallel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "thread_pool.h"

namespace tsorch {

// A shape and NARG stride lists with size-1 dims dropped and mergeable neighbours merged (dims i
// and i+1 merge when, for every operand, stride[i] == stride[i+1] * shape[i+1]).
template <int NARG>
struct Layout {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides[NARG];

  Layout(const std::vector<int64_t>& shp, const std::vector<int64_t>* const (&st)[NARG]) {
    for (size_t d = 0; d < shp.size(); ++d) {
      if (shp[d] == 1) continue;
      bool merge = !shape.empty();
      for (int a = 0; a < NARG && merge; ++a)
        merge = strides[a].back() == (*st[a])[d] * shp[d];
      if (merge) {
        shape.back() *= shp[d];
        for (int a = 0; a < NARG; ++a) strides[a].back() = (*st[a])[d];
      } else {
        shape.push_back(shp[d]);
        for (int a = 0; a < NARG; ++a) strides[a].push_back((*st[a])[d]);
      }
    }
    if (shape.empty()) {  // a scalar
      shape.push_back(1);
      for (int a = 0; a < NARG; ++a) strides[a].push_back(0);
    }
  }
};

// Calls inner(offsets, n, innerStrides) over every run of the innermost dimension (offsets in
// elements, one per operand), splitting the work over the thread pool when it is large. Long
// innermost runs are cut into chunks so that even a 1-D job parallelises.
template <int NARG, class F>
void for_each_strided(const std::vector<int64_t>& shape,
                      const std::vector<int64_t>* const (&strides)[NARG], F&& inner) {
  for (int64_t s : shape)
    if (s == 0) return;
  Layout<NARG> L(shape, strides);
  const int nd = static_cast<int>(L.shape.size());
  const int64_t n = L.shape[nd - 1];
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; ++d) rows *= L.shape[d];

  ThreadPool& pool = ThreadPool::get();
  const int64_t tasks_wanted = split_count(static_cast<double>(rows) * n * 2, 4 * pool.size());
  // Cut rows into chunks of `chunk` elements when there are fewer rows than tasks.
  const int64_t chunk = rows >= tasks_wanted ? n : std::max<int64_t>(4096, (n * rows + tasks_wanted - 1) / tasks_wanted);
  const int64_t per_row = (n + chunk - 1) / chunk;
  const int64_t units = rows * per_row;
  const int64_t ntasks = std::min(units, tasks_wanted);

  int64_t inner_strides[NARG];
  for (int a = 0; a < NARG; ++a) inner_strides[a] = L.strides[a][nd - 1];

  pool.parallel_for(ntasks, [&](int64_t t) {
    const int64_t u0 = units * t / ntasks, u1 = units * (t + 1) / ntasks;
    // Multi-index of the first row, then an odometer.
    std::vector<int64_t> idx(nd > 1 ? nd - 1 : 1, 0);
    int64_t row = u0 / per_row;
    int64_t off[NARG] = {};
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = row % L.shape[d];
      row /= L.shape[d];
      for (int a = 0; a < NARG; ++a) off[a] += idx[d] * L.strides[a][d];
    }
    int64_t c = u0 % per_row;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t start = c * chunk, len = std::min(chunk, n - start);
      int64_t o[NARG];
      for (int a = 0; a < NARG; ++a) o[a] = off[a] + start * inner_strides[a];
      inner(o, len, inner_strides);
      if (++c == per_row) {
        c = 0;
        for (int d = nd - 2; d >= 0; --d) {
          for (int a = 0; a < NARG; ++a) off[a] += L.strides[a][d];
          if (++idx[d] < L.shape[d]) break;
          for (int a = 0; a < NARG; ++a) off[a] -= idx[d] * L.strides[a][d];
          idx[d] = 0;
        }
      }
    }
  });
}

}  // namespace tsorch
