// CPU feature detection and the load-time choice of kernels (see cpu.h).
#include "cpu.h"

#include <cstdlib>
#include <cstring>

namespace tsorch {

namespace {

struct Selection {
  std::string features;
  const GemmKernels* gemm;
};

Selection select() {
  Selection s{"", &gemm_kernels_portable()};
#if defined(TSORCH_X86_KERNELS)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const struct { const char* name; bool on; } flags[] = {
      {"avx512f", __builtin_cpu_supports("avx512f") != 0},
      {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
      {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
      {"avx512bf16", __builtin_cpu_supports("avx512bf16") != 0},
      {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0},
      {"avx2", __builtin_cpu_supports("avx2") != 0},
      {"fma", __builtin_cpu_supports("fma") != 0},
      {"f16c", __builtin_cpu_supports("f16c") != 0},
  };
  for (const auto& f : flags)
    if (f.on) s.features += std::string(f.name) + " ";
  const char* want = std::getenv("TSORCH_CPU_ISA");
  const bool allow512 = !want || std::strcmp(want, "avx512") == 0;
  const bool allow2 = allow512 || std::strcmp(want, "avx2") == 0;
  if (avx512 && allow512) s.gemm = &gemm_kernels_avx512();
  else if (avx2 && allow2) s.gemm = &gemm_kernels_avx2();
#endif
  s.features += std::string("kernels=") + s.gemm->name;
  return s;
}

const Selection& selection() {
  static const Selection s = select();
  return s;
}

}  // namespace

const GemmKernels& gemm_kernels() { return *selection().gemm; }

const std::string& cpu_features() { return selection().features; }

}  // namespace tsorch
