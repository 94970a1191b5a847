// e^x over the whole float range in plain scalar code that GCC's loop vectorizer turns into AVX-512
// / AVX2 code in target_clones callers (no libm call, no branch): for the element-wise SiLU and
// sigmoid (elementwise.cc), which called libm's scalar expf per element (~5 ns each; the decode
// MLP's SiLU * up over 3072 values took ~15 us).
//
// Cephes' expf: n = round(x log2 e), r = x - n ln 2 with ln 2 split in two (Cody-Waite: n * C1 is
// exact), e^r by its degree-7 polynomial (within ~1 ulp), times 2^n as 2^n1 * 2^n2 (n = n1 + n2,
// both halves normal for n in [-150, 128], so results down to the subnormals come out right).
// x > 88.73 gives +inf, x < -104 gives 0, NaN stays NaN. Always inlined, so that each clone of a
// caller gets it for its ISA.
#pragma once

#include <cstdint>
#include <cstring>

namespace tsorch {
namespace {

inline __attribute__((always_inline)) float exp_any(float x) {
  const float c = x > 88.8f ? 88.8f : (x < -104.f ? -104.f : x);  // NaN passes through
  const float shifted = c * 1.44269504088896341f + 12582912.f;     // 1.5 * 2^23: rounds to an integer
  const float n = shifted - 12582912.f;
  const float r = (c - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const int32_t ni = bits - 0x4B400000, n1 = ni >> 1, n2 = ni - n1;  // n, from the mantissa
  const uint32_t e1 = static_cast<uint32_t>(n1 + 127) << 23, e2 = static_cast<uint32_t>(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &e1, sizeof s1);
  std::memcpy(&s2, &e2, sizeof s2);
  const float result = p * s1 * s2;
  return x > 88.73f ? __builtin_inff() : (x < -104.f ? 0.f : result);
}

}  // namespace
}  // namespace tsorch
