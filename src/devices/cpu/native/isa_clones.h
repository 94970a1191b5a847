// TSORCH_ISA_CLONES: compile a function for AVX-512 (x86-64-v4), AVX2+FMA (x86-64-v3) and the
// baseline, the copy chosen at load time (GCC's target_clones on x86-64; elsewhere, and with
// clang, the baseline only). For hot loops written with GCC/Clang vector extensions or plain loops
// that GCC vectorizes, where a separate -m-flagged static library would be overkill.
#pragma once

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TSORCH_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSORCH_ISA_CLONES
#endif

namespace tsorch {

// The clone of TSORCH_ISA_CLONES functions this process runs: "x86-64-v4", "x86-64-v3" or
// "baseline", by the ISA levels the clones' resolver checks; "none" where the functions are
// compiled once (not GCC on x86-64). cpuFeatures() reports it as clones=, and
// test/cpu_emulated_hosts.test.ts runs the other clones on an emulated CPU.
inline const char* isa_clone_level() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const char* const level = __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
                                   : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                                                                         : "baseline";
  return level;
#else
  return "none";
#endif
}

// Whether this process runs the x86-64-v4 (AVX-512) clones.
inline bool runs_v4_clones() {
  static const bool v4 = std::strcmp(isa_clone_level(), "x86-64-v4") == 0;
  return v4;
}

}  // namespace tsorch
