// 2^t over the whole float range in plain scalar code that GCC's loop vectorizer turns into
// AVX-512 / AVX2 code in target_clones callers (no libm call, no branch): for the element-wise
// SiLU and sigmoid (elementwise.cc), which called libm's scalar expf per element (~5 ns each; the
// decode MLP's SiLU * up over 3072 values took ~15 us).
//
// 2^t = 2^n1 * 2^n2 * 2^f with n = round(t) = n1 + n2 (both halves normal for n in [-150, 128]) and
// |f| <= 1/2, 2^f by Cephes' exp2f polynomial (relative error ~2e-7); t > 128 gives +inf, t < -150
// gives 0, NaN stays NaN. Always inlined, so that each clone of a caller gets it for its ISA.
#pragma once

#include <cstdint>
#include <cstring>

namespace tsorch {
namespace {

inline __attribute__((always_inline)) float exp2_any(float t) {
  const float x = t > 128.f ? 128.f : (t < -150.f ? -150.f : t);  // NaN passes through
  const float shifted = x + 12582912.f;                            // 1.5 * 2^23: rounds x to an integer
  const float n = shifted - 12582912.f, f = x - n;
  float p = 1.535336188319500e-4f * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const int32_t ni = bits - 0x4B400000, n1 = ni >> 1, n2 = ni - n1;  // round(x), from the mantissa
  const uint32_t e1 = static_cast<uint32_t>(n1 + 127) << 23, e2 = static_cast<uint32_t>(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &e1, sizeof s1);
  std::memcpy(&s2, &e2, sizeof s2);
  const float r = p * s1 * s2;
  return t > 128.f ? __builtin_inff() : (t < -150.f ? 0.f : r);
}

}  // namespace
}  // namespace tsorch
