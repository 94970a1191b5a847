// allocateHost(nbytes): zeroed host memory for cpu tensors, mapped here rather than taken from
// malloc, for two reasons.
//
// Pre-faulted: every page of the mapping is made present before the buffer is handed out
// (MADV_POPULATE_WRITE, or one write per page where the kernel predates it). A first touch of a
// page otherwise faults in the middle of a kernel: on the host measured (a Firecracker VM, AMD
// EPYC Zen 5) one 4 KB fault costs ~14 us, pre-faulting ~0.6 us per page; a decode step that
// writes one new position into each layer's KV cache buffers (4 KB per buffer and position for
// Qwen3-0.6B) faulted 56 times per token, ~0.8 ms of a 13 ms int4 step.
//
// Huge pages: weights are streamed once per decode step; with 4 KB pages the hardware prefetchers
// stop at every page boundary and every 4 KB costs a TLB miss: on the same host (THP in "madvise"
// mode, 2 threads) the bf16 decode GEMVs of a Qwen3-0.6B-shaped model read 40 GB/s from 4 KB pages
// and 48 GB/s from 2 MB pages. The mapping starts on a 2 MB boundary and its whole 2 MB pages are
// advised before they are populated (the advice only affects pages not yet present; calloc may
// hand out recycled, already touched heap memory).
//
// The mapping is unmapped when the ArrayBuffer is collected (V8 is told of its size, so that its
// collector runs as it would for an ordinary buffer).
#include <cstdint>

#include "host_memory.h"
#include "napi_args.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tsorch {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
namespace {

constexpr size_t kHuge = size_t{2} << 20;

struct Region {
  void* base;
  size_t bytes;
};

void free_region(napi_env env, void*, void* hint) {
  Region* r = static_cast<Region*>(hint);
  munmap(r->base, r->bytes);
  int64_t unused;
  napi_adjust_external_memory(env, -static_cast<int64_t>(r->bytes), &unused);
  delete r;
}

// An anonymous mapping of `bytes` (a multiple of the 4 KB page), 2 MB-aligned from 2 MB on, or nullptr.
void* map_aligned(size_t bytes) {
  if (bytes < kHuge) {
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return base == MAP_FAILED ? nullptr : base;
  }
  void* reserved = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(reserved);
  const uintptr_t aligned = (begin + kHuge - 1) & ~(kHuge - 1);
  if (aligned > begin) munmap(reserved, aligned - begin);
  const uintptr_t end = begin + bytes + kHuge;
  if (end > aligned + bytes) munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  return reinterpret_cast<void*>(aligned);
}

// Make every 4 KB page of [base, base + bytes) present and writable.
void populate(void* base, size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
  if (madvise(base, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  volatile char* p = static_cast<volatile char*>(base);
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 0;
}

}  // namespace
#endif

// allocateHost(nbytes) -> ArrayBuffer of nbytes zero bytes, pre-faulted, on 2 MB pages from 2 MB
// on; null where this platform has no such mappings (or pages other than 4 KB) or the mapping
// fails (the caller then allocates normally).
napi_value AllocateHost(napi_env env, napi_callback_info info) {
  Args args(env, info, "allocateHost", 1);
  const int64_t n = args.integer(0, "nbytes", 1);
  if (args.failed()) return nullptr;
  napi_value result;
  napi_get_null(env, &result);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // 4 KB base pages only (x86-64, most arm64): the 2 MB alignment and huge pages assume them.
  if (sysconf(_SC_PAGESIZE) != 4096) return result;
  const size_t bytes = (static_cast<size_t>(n) + 4095) & ~size_t{4095};
  void* base = map_aligned(bytes);
  if (base == nullptr) return result;
  if (bytes >= kHuge) madvise(base, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // failures only cost speed
  populate(base, bytes);
  Region* r = new Region{base, bytes};
  if (napi_create_external_arraybuffer(env, base, static_cast<size_t>(n), free_region, r, &result) != napi_ok) {
    munmap(base, bytes);
    delete r;
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value error;
      napi_get_and_clear_last_exception(env, &error);
    }
    napi_get_null(env, &result);
    return result;
  }
  int64_t unused;
  napi_adjust_external_memory(env, static_cast<int64_t>(bytes), &unused);
#endif
  return result;
}

}  // namespace tsorch
