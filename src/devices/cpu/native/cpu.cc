// CPU feature detection and the load-time choice of kernels (see cpu.h).
#include "cpu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "isa_clones.h"

namespace tsorch {

namespace {

struct Selection {
  std::string features;
  const GemmKernels* gemm;
  const IntQuantKernels* int8;
  const Bf16GemmKernels* bf16;
};

bool wants(const char* env, const char* name) {
  const char* want = std::getenv(env);
  return !want || std::strcmp(want, name) == 0;
}

// The integer quantized path: the best one the host supports within the GEMM's tier, or the one
// TSORCH_CPU_INT8 names (avx512-vnni, avx-vnni, avx2, portable; "off": float activations).
const IntQuantKernels* select_int8(const GemmKernels* gemm) {
  const char* want = std::getenv("TSORCH_CPU_INT8");
  if (want && std::strcmp(want, "off") == 0) return nullptr;
  const IntQuantKernels* k = &int_quant_kernels_portable();
#if defined(TSORCH_X86_KERNELS)
  const bool x86 = std::strcmp(gemm->name, "portable") != 0;
  if (x86 && wants("TSORCH_CPU_INT8", "avx2")) k = &int_quant_kernels_avx2();
  if (x86 && __builtin_cpu_supports("avxvnni") && wants("TSORCH_CPU_INT8", "avx-vnni")) k = &int_quant_kernels_avxvnni();
  if (std::strcmp(gemm->name, "avx512") == 0 && __builtin_cpu_supports("avx512vnni") &&
      wants("TSORCH_CPU_INT8", "avx512-vnni"))
    k = &int_quant_kernels_avx512vnni();
#endif
  if (want && std::strcmp(want, k->name) != 0)
    std::fprintf(stderr, "tsorch: TSORCH_CPU_INT8=%s is not available here (kernels=%s); using %s\n", want, gemm->name, k->name);
  return k;
}

Selection select() {
  Selection s{"", &gemm_kernels_portable(), nullptr, nullptr};
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
      {"avxvnni", __builtin_cpu_supports("avxvnni") != 0},
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
  s.int8 = select_int8(s.gemm);
  s.features += std::string(" int8=") + (s.int8 ? s.int8->name : "off");
#if defined(TSORCH_X86_KERNELS)
  // bfloat16 weights at M >= 2 take the vdpbf16ps GEMM where the host has it (activations rounded
  // to bfloat16); TSORCH_CPU_BF16=f32 keeps the float32 path.
  const char* bf16_want = std::getenv("TSORCH_CPU_BF16");
  const bool bf16_off = bf16_want && std::strcmp(bf16_want, "f32") == 0;
  if (!bf16_off && std::strcmp(s.gemm->name, "avx512") == 0 && __builtin_cpu_supports("avx512bf16"))
    s.bf16 = &gemm_kernels_avx512bf16();
  if (bf16_want && !bf16_off && std::strcmp(bf16_want, "avx512-bf16") != 0)
    std::fprintf(stderr, "tsorch: TSORCH_CPU_BF16=%s is not one of f32, avx512-bf16; ignored\n", bf16_want);
  else if (bf16_want && !bf16_off && !s.bf16)
    std::fprintf(stderr, "tsorch: TSORCH_CPU_BF16=%s is not available here (kernels=%s); using f32\n", bf16_want, s.gemm->name);
#endif
  s.features += std::string(" bf16=") + (s.bf16 ? s.bf16->name : "f32");
  s.features += std::string(" clones=") + isa_clone_level();
  return s;
}

const Selection& selection() {
  static const Selection s = select();
  return s;
}

}  // namespace

const GemmKernels& gemm_kernels() { return *selection().gemm; }

const std::string& cpu_features() { return selection().features; }

const IntQuantKernels* int_quant_kernels() { return selection().int8; }

const Bf16GemmKernels* bf16_gemm_kernels() { return selection().bf16; }

}  // namespace tsorch
