// Pass 2 of 4 — one grouped GEMM for the gate and up projections of all experts. Workgroup
// (x, y, z) takes tile y + 65535 z (up to 2 sorted rows of one expert) and 256 columns; each
// invocation owns 4 columns 64 apart of both projections, keeps the 2 x 4 x 2 sums in named f32 registers (written
// out unrolled: no private array indexed at run time; scalar sums fed by dot(), not vec4 sums, keep
// lavapipe's lane registers free for the weights: about 1.3x faster at the bench shape) and streams its 8 weight rows 8 values at a
// time, while the tile's token rows are read by every invocation alike (uniform loads). On CPU
// rasterizers (lavapipe: invocations are SIMD lanes) each uniform input load then feeds 8 lane-wide
// FMAs. Epilogue: HS[position, n] = silu(gate) * up.
// Needs H % 8 == 0 and 8-aligned offsets. Params: 0 K (top-k), 1 H, 2 I, 3 x offset, 4 gate_up offset.
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> TILES: array<u32>;
@group(0) @binding(4) var<storage, read> SORTED: array<u32>;
@group(0) @binding(5) var<storage, read_write> HS: array<f32>;
const DT: u32 = gate_up_DTYPE;

// 8 consecutive weights from element e (e % 8 == 0): float32, float16 or bfloat16.
fn w8(e: u32) -> mat2x4<f32> {
  if (DT == 0u) { return mat2x4<f32>(bitcast<vec4<f32>>(W[e / 4u]), bitcast<vec4<f32>>(W[e / 4u + 1u])); }
  let v = W[e / 8u];
  if (DT == 2u) {
    return mat2x4<f32>(bitcast<vec4<f32>>(vec4<u32>(v.x << 16u, v.x & 0xffff0000u, v.y << 16u, v.y & 0xffff0000u)),
                       bitcast<vec4<f32>>(vec4<u32>(v.z << 16u, v.z & 0xffff0000u, v.w << 16u, v.w & 0xffff0000u)));
  }
  return mat2x4<f32>(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)), vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
}

fn silu_mul(a: f32, u: f32) -> f32 {
  return a / (1.0 + exp(-a)) * u;
}

@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.y + wid.z * 65535u;
  if (t >= TILES[0]) { return; }
  let K = pu(0u); let H = pu(1u); let I = pu(2u);
  let e = TILES[1u + 3u * t]; let row0 = TILES[2u + 3u * t]; let rows = TILES[3u + 3u * t];
  let n0 = wid.x * 256u + lid;
  // a 1-row tile computes its row twice and stores it once
  let x0 = pu(3u) / 4u + (SORTED[row0] / K) * (H / 4u);
  let x1 = pu(3u) / 4u + (SORTED[row0 + min(1u, rows - 1u)] / K) * (H / 4u);
  let gb0 = pu(4u) + (e * 2u * I + min(n0 + 0u, I - 1u)) * H; let ub0 = gb0 + I * H;
  let gb1 = pu(4u) + (e * 2u * I + min(n0 + 64u, I - 1u)) * H; let ub1 = gb1 + I * H;
  let gb2 = pu(4u) + (e * 2u * I + min(n0 + 128u, I - 1u)) * H; let ub2 = gb2 + I * H;
  let gb3 = pu(4u) + (e * 2u * I + min(n0 + 192u, I - 1u)) * H; let ub3 = gb3 + I * H;
  var g00 = 0.0; var u00 = 0.0;
  var g01 = 0.0; var u01 = 0.0;
  var g02 = 0.0; var u02 = 0.0;
  var g03 = 0.0; var u03 = 0.0;
  var g10 = 0.0; var u10 = 0.0;
  var g11 = 0.0; var u11 = 0.0;
  var g12 = 0.0; var u12 = 0.0;
  var g13 = 0.0; var u13 = 0.0;
  for (var k = 0u; k < H; k = k + 8u) {
    let wg0 = w8(gb0 + k); let wu0 = w8(ub0 + k);
    let wg1 = w8(gb1 + k); let wu1 = w8(ub1 + k);
    let wg2 = w8(gb2 + k); let wu2 = w8(ub2 + k);
    let wg3 = w8(gb3 + k); let wu3 = w8(ub3 + k);
    { let xa = X[x0 + k / 4u]; let xc = X[x0 + k / 4u + 1u];
      g00 = g00 + dot(xa, wg0[0]) + dot(xc, wg0[1]); u00 = u00 + dot(xa, wu0[0]) + dot(xc, wu0[1]);
      g01 = g01 + dot(xa, wg1[0]) + dot(xc, wg1[1]); u01 = u01 + dot(xa, wu1[0]) + dot(xc, wu1[1]);
      g02 = g02 + dot(xa, wg2[0]) + dot(xc, wg2[1]); u02 = u02 + dot(xa, wu2[0]) + dot(xc, wu2[1]);
      g03 = g03 + dot(xa, wg3[0]) + dot(xc, wg3[1]); u03 = u03 + dot(xa, wu3[0]) + dot(xc, wu3[1]);
    }
    { let xa = X[x1 + k / 4u]; let xc = X[x1 + k / 4u + 1u];
      g10 = g10 + dot(xa, wg0[0]) + dot(xc, wg0[1]); u10 = u10 + dot(xa, wu0[0]) + dot(xc, wu0[1]);
      g11 = g11 + dot(xa, wg1[0]) + dot(xc, wg1[1]); u11 = u11 + dot(xa, wu1[0]) + dot(xc, wu1[1]);
      g12 = g12 + dot(xa, wg2[0]) + dot(xc, wg2[1]); u12 = u12 + dot(xa, wu2[0]) + dot(xc, wu2[1]);
      g13 = g13 + dot(xa, wg3[0]) + dot(xc, wg3[1]); u13 = u13 + dot(xa, wu3[0]) + dot(xc, wu3[1]);
    }
  }
  if (0u < rows && n0 + 0u < I) { HS[(row0 + 0u) * I + n0 + 0u] = silu_mul(g00, u00); }
  if (0u < rows && n0 + 64u < I) { HS[(row0 + 0u) * I + n0 + 64u] = silu_mul(g01, u01); }
  if (0u < rows && n0 + 128u < I) { HS[(row0 + 0u) * I + n0 + 128u] = silu_mul(g02, u02); }
  if (0u < rows && n0 + 192u < I) { HS[(row0 + 0u) * I + n0 + 192u] = silu_mul(g03, u03); }
  if (1u < rows && n0 + 0u < I) { HS[(row0 + 1u) * I + n0 + 0u] = silu_mul(g10, u10); }
  if (1u < rows && n0 + 64u < I) { HS[(row0 + 1u) * I + n0 + 64u] = silu_mul(g11, u11); }
  if (1u < rows && n0 + 128u < I) { HS[(row0 + 1u) * I + n0 + 128u] = silu_mul(g12, u12); }
  if (1u < rows && n0 + 192u < I) { HS[(row0 + 1u) * I + n0 + 192u] = silu_mul(g13, u13); }
}
