// advise_huge_pages: ask Linux to back a buffer with transparent huge pages (2 MB).
//
// Weights are streamed once per decode step; with 4 KB pages the hardware prefetchers stop at
// every page boundary, and on the machines measured (Zen 4, THP in "madvise" mode) a single-thread
// read of a 1 GB buffer went from ~25 to ~32 GB/s with huge pages. The advice only affects pages
// not yet touched, so it must come right after allocation, before the buffer is written.
#include "ops.h"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tsorch {

void advise_huge_pages(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  // Only whole huge pages inside the buffer: the advice applies to the pages it covers, and the
  // neighbours of the buffer are not ours to change. A failure only costs speed: ignored.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace tsorch
