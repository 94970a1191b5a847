// dequant_mxfp4: MXFP4 (OCP microscaling FP4) blocks to float32, as transformers'
// convert_moe_packed_tensors (integrations/mxfp4.py): each block of 32 values is 16 bytes of e2m1
// codes, low nibble first, sharing one uint8 scale exponent biased by 127.
#include <cmath>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {
constexpr float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
}  // namespace

void dequant_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t scale_row, float* out,
                   int64_t rows, int64_t nb) {
  const auto row = [&](int64_t r) {
    const uint8_t* b = blocks + r * nb * 16;
    const uint8_t* s = scales + r * scale_row;
    float* o = out + r * nb * 32;
    for (int64_t g = 0; g < nb; ++g) {
      const float scale = std::ldexp(1.0f, static_cast<int>(s[g]) - 127);
      for (int j = 0; j < 16; ++j) {
        o[g * 32 + 2 * j] = kFp4[b[g * 16 + j] & 0x0F] * scale;
        o[g * 32 + 2 * j + 1] = kFp4[b[g * 16 + j] >> 4] * scale;
      }
    }
  };
  parallel_rows(rows, static_cast<double>(nb) * 32, row);
}

}  // namespace tsorch
