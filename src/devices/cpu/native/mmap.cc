// mapRegions: the whole file is mapped once, privately (MAP_PRIVATE: nothing ever reaches the
// file), and every requested byte range becomes an external ArrayBuffer over the mapping. The
// mapping is reference-counted: each ArrayBuffer's finalizer drops one reference and the last one
// unmaps, so the mapping outlives every view JS can reach. Ranges are separate ArrayBuffers, so
// a file larger than Node's largest typed array (4 GiB on Node 20) maps as long as each range fits.
//
// Pages are mapped readable and writable copy-on-write rather than read-only: a cpu tensor over
// the mapping may be handed to the device's buffer pool and reused as an output, and a write must
// then cost a private page copy, not kill the process with SIGSEGV. MAP_NORESERVE keeps a mapping
// larger than RAM + swap from being refused by overcommit accounting (clean pages are file pages).
#include "mmap.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "napi_args.h"

#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace tsorch {

namespace {

#if !defined(_WIN32)

// One mapping and the number of live references to it (ArrayBuffers, plus MapRegions itself while
// it runs). Node runs the finalizers on the JS thread; the counter is atomic all the same, so no
// runtime that frees backing stores elsewhere can unmap twice or early.
struct Mapping {
  void* base;
  size_t size;
  std::atomic<int64_t> refs;
};

void release(Mapping* m) {
  if (m->refs.fetch_sub(1) > 1) return;
  if (m->base != nullptr) munmap(m->base, m->size);
  delete m;
}

void finalize(napi_env, void*, void* hint) { release(static_cast<Mapping*>(hint)); }

// Map the file at a 2 MB-aligned address and advise huge pages (Linux): on filesystems whose page
// cache holds large folios (ext4, xfs, btrfs on recent kernels) the weights are then mapped with
// 2 MB entries, as the cpu device's own buffers are (huge_pages.cc); with 4 KB entries a decode
// step, which streams every weight, ran 2-3x slower on the machines measured.
void* map_huge_aligned(int fd, size_t size) {
  constexpr int kProt = PROT_READ | PROT_WRITE;
  constexpr int kFlags = MAP_PRIVATE | MAP_NORESERVE;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* reserved = mmap(nullptr, size + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved != MAP_FAILED) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(reserved), end = begin + size + kHuge;
    const uintptr_t aligned = (begin + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t mapped_end = aligned + ((size + page - 1) & ~(page - 1));
    void* base = mmap(reinterpret_cast<void*>(aligned), size, kProt, kFlags | MAP_FIXED, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      munmap(reserved, size + kHuge);
      errno = err;
      return MAP_FAILED;
    }
    if (aligned > begin) munmap(reserved, aligned - begin);
    if (end > mapped_end) munmap(reinterpret_cast<void*>(mapped_end), end - mapped_end);
    madvise(base, size, MADV_HUGEPAGE);  // only speed depends on it: failures are ignored
    return base;
  }
#endif
  return mmap(nullptr, size, kProt, kFlags, fd, 0);
}

napi_value throw_error(napi_env env, const char* code, const std::string& msg) {
  napi_throw_error(env, code, ("tsorch_cpu.mapRegions: " + msg).c_str());
  return nullptr;
}

#endif

}  // namespace

napi_value MapRegions(napi_env env, napi_callback_info info) {
  Args args(env, info, "mapRegions", 3);
  const std::vector<int64_t> offsets = args.ints(1, "offsets", -1, 0);
  const std::vector<int64_t> lengths = args.ints(2, "lengths", static_cast<int64_t>(offsets.size()), 0);
  if (args.failed()) return nullptr;
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  size_t path_len = 0;
  if (napi_get_value_string_utf8(env, argv[0], nullptr, 0, &path_len) != napi_ok) {
    napi_throw_type_error(env, nullptr, "tsorch_cpu.mapRegions: argument 'path' must be a string");
    return nullptr;
  }
  std::string path(path_len, '\0');
  napi_get_value_string_utf8(env, argv[0], path.data(), path_len + 1, &path_len);

#if defined(_WIN32)
  return throw_error(env, "ERR_TSORCH_NO_MMAP", "memory mapping is not implemented on Windows");
#else
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return throw_error(env, "ERR_TSORCH_MMAP", "cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return throw_error(env, "ERR_TSORCH_MMAP", "cannot stat " + path + ": " + std::strerror(err));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (static_cast<uint64_t>(offsets[i]) > size || static_cast<uint64_t>(lengths[i]) > size - offsets[i]) {
      close(fd);
      return throw_error(env, "ERR_TSORCH_MMAP", "range " + std::to_string(i) + " [" +
                         std::to_string(offsets[i]) + ", +" + std::to_string(lengths[i]) +
                         ") goes past the end of " + path + " (" + std::to_string(size) + " bytes)");
    }
  }
  void* base = size > 0 ? map_huge_aligned(fd, static_cast<size_t>(size)) : nullptr;
  const int map_errno = errno;
  close(fd);  // the mapping keeps the file alive
  if (base == MAP_FAILED) {
    return throw_error(env, "ERR_TSORCH_MMAP", "cannot map " + path + ": " + std::strerror(map_errno));
  }
  Mapping* m = new Mapping{base, static_cast<size_t>(size), {1}};

  napi_value result;
  napi_create_array_with_length(env, offsets.size(), &result);
  for (size_t i = 0; i < offsets.size(); ++i) {
    napi_value ab;
    napi_status s;
    if (lengths[i] == 0 || base == nullptr) {
      void* unused;
      s = napi_create_arraybuffer(env, 0, &unused, &ab);
    } else {
      ++m->refs;
      s = napi_create_external_arraybuffer(env, static_cast<char*>(base) + offsets[i],
                                           static_cast<size_t>(lengths[i]), finalize, m, &ab);
      if (s != napi_ok) --m->refs;  // no buffer, so no finalizer will run
    }
    if (s != napi_ok) {
      release(m);  // buffers already made keep their references
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) return nullptr;
      return throw_error(env, s == napi_no_external_buffers_allowed ? "ERR_TSORCH_NO_EXTERNAL_BUFFERS" : "ERR_TSORCH_MMAP",
                         "cannot create an ArrayBuffer over " + path + " (napi status " + std::to_string(s) + ")");
    }
    napi_set_element(env, result, static_cast<uint32_t>(i), ab);
  }
  release(m);
  return result;
#endif
}

}  // namespace tsorch
