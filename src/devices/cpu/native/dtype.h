// dtype codes of the ABI (native.ts DTYPE_CODE) and scalar float16 / bfloat16 conversions.
//
// Every helper here has internal linkage (static inline): this header is also included by the
// per-ISA translation units, which are compiled with -mavx2 / -mavx512f. An `inline` function
// with external linkage would be emitted there with AVX instructions and the linker could pick
// that copy for the portable code, which would then crash on older CPUs.
#pragma once

#include <cstdint>
#include <cstring>

namespace tsorch {

enum DType : int { kF32 = 0, kF16 = 1, kBF16 = 2, kI32 = 3, kI64 = 4, kBool = 5 };
constexpr int kNumDTypes = 6;

static inline bool dtype_valid(int64_t code) { return code >= 0 && code < kNumDTypes; }
static inline bool dtype_is_float(int code) { return code == kF32 || code == kF16 || code == kBF16; }

static inline int dtype_size(int code) {
  switch (code) {
    case kF32: case kI32: return 4;
    case kF16: case kBF16: return 2;
    case kI64: return 8;
    default: return 1;
  }
}

static inline const char* dtype_name(int code) {
  switch (code) {
    case kF32: return "float32";
    case kF16: return "float16";
    case kBF16: return "bfloat16";
    case kI32: return "int32";
    case kI64: return "int64";
    case kBool: return "bool";
    default: return "unknown dtype";
  }
}

static inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// bfloat16 is the high half of a float32.
static inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays a (quiet) NaN of the same sign.
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16 -> float32, exact (subnormals, infinities and NaN included).
static inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_f32(sign);
  // Subnormal: shift the leading 1 into the implicit position.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) { mant <<= 1; --e; }
  return bits_f32(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

// float32 -> IEEE binary16, round to nearest even; overflow gives inf, NaN a quiet NaN.
static inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u >= 0x7f800000u) return sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (u < 0x38800000u) {
    // Result is subnormal or zero: let the FPU's round-to-nearest-even do the work by adding a
    // magic number that puts the half's ulp at the float's ulp (2^-24 * 2^23 = 0.5).
    const float magic = bits_f32(126u << 23);
    return sign | static_cast<uint16_t>(f32_bits(bits_f32(u) + magic) - (126u << 23));
  }
  const uint32_t odd = (u >> 13) & 1u;
  u += 0xc8000fffu + odd;  // rebias exponent (-112 << 23, mod 2^32) and round
  return sign | static_cast<uint16_t>(u >> 13);
}

// Element i of a float32 / float16 / bfloat16 array, as float32 (for small per-row vectors such
// as norm weights and biases; hot loops specialise on the dtype instead).
static inline float load_float(const void* p, int dtype, int64_t i) {
  switch (dtype) {
    case kF16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case kBF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

}  // namespace tsorch
