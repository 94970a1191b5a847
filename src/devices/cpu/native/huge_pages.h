// allocateHuge: zeroed host memory on transparent huge pages, as external ArrayBuffers, and the
// mapping under it for native callers (huge_pages.cc).
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstddef>

namespace tsorch {

// An anonymous mapping of at least the bytes asked for (zero-filled, 4 KB multiple), starting on a
// 2 MB boundary, its whole 2 MB pages advised for transparent huge pages; base null where the
// platform has no such mappings or the mapping failed. The memory the cpu device keeps its large
// tensors in (allocateHuge), so also the memory membw.cc reads to measure the bandwidth they get.
struct HugeMapping {
  void* base = nullptr;
  size_t bytes = 0;
};
HugeMapping map_huge(size_t nbytes);
void unmap_huge(const HugeMapping& m);  // (no-op for a null mapping)

// allocateHuge(nbytes) -> ArrayBuffer | null (contract in ../native.ts).
napi_value AllocateHuge(napi_env env, napi_callback_info info);

}  // namespace tsorch
