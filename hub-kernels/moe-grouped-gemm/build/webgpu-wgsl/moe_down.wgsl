// Pass 3 of 4 — one grouped GEMM for the down projection of all experts, laid out as pass 2 (tiles
// of up to 2 sorted rows; each invocation owns 8 columns 64 apart in named f32 registers, the
// tile's rows of HS read uniformly), with the top-k weighting and the scatter back fused in the
// epilogue: YK[r, n] = topk_weight[r] * (HS[position] . down[e, n]) for the routed row r of each
// sorted position. Needs I % 8 == 0 and 8-aligned offsets.
// Params: 0 H, 1 I, 2 down offset, 3 topk_weights offset.
@group(0) @binding(1) var<storage, read> HS: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> TILES: array<u32>;
@group(0) @binding(4) var<storage, read> SORTED: array<u32>;
@group(0) @binding(5) var<storage, read> TW: array<f32>;
@group(0) @binding(6) var<storage, read_write> YK: array<f32>;
const DT: u32 = down_DTYPE;

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

@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.y + wid.z * 65535u;
  if (t >= TILES[0]) { return; }
  let H = pu(0u); let I = pu(1u);
  let e = TILES[1u + 3u * t]; let row0 = TILES[2u + 3u * t]; let rows = TILES[3u + 3u * t];
  let n0 = wid.x * 512u + lid;
  // a 1-row tile computes its row twice and stores it once
  let h0 = row0 * (I / 4u);
  let h1 = (row0 + min(1u, rows - 1u)) * (I / 4u);
  let wb0 = pu(2u) + (e * H + min(n0 + 0u, H - 1u)) * I;
  let wb1 = pu(2u) + (e * H + min(n0 + 64u, H - 1u)) * I;
  let wb2 = pu(2u) + (e * H + min(n0 + 128u, H - 1u)) * I;
  let wb3 = pu(2u) + (e * H + min(n0 + 192u, H - 1u)) * I;
  let wb4 = pu(2u) + (e * H + min(n0 + 256u, H - 1u)) * I;
  let wb5 = pu(2u) + (e * H + min(n0 + 320u, H - 1u)) * I;
  let wb6 = pu(2u) + (e * H + min(n0 + 384u, H - 1u)) * I;
  let wb7 = pu(2u) + (e * H + min(n0 + 448u, H - 1u)) * I;
  var a00 = 0.0;
  var a01 = 0.0;
  var a02 = 0.0;
  var a03 = 0.0;
  var a04 = 0.0;
  var a05 = 0.0;
  var a06 = 0.0;
  var a07 = 0.0;
  var a10 = 0.0;
  var a11 = 0.0;
  var a12 = 0.0;
  var a13 = 0.0;
  var a14 = 0.0;
  var a15 = 0.0;
  var a16 = 0.0;
  var a17 = 0.0;
  for (var k = 0u; k < I; k = k + 8u) {
    let w0 = w8(wb0 + k);
    let w1 = w8(wb1 + k);
    let w2 = w8(wb2 + k);
    let w3 = w8(wb3 + k);
    let w4 = w8(wb4 + k);
    let w5 = w8(wb5 + k);
    let w6 = w8(wb6 + k);
    let w7 = w8(wb7 + k);
    { let ha = HS[h0 + k / 4u]; let hc = HS[h0 + k / 4u + 1u];
      a00 = a00 + dot(ha, w0[0]) + dot(hc, w0[1]);
      a01 = a01 + dot(ha, w1[0]) + dot(hc, w1[1]);
      a02 = a02 + dot(ha, w2[0]) + dot(hc, w2[1]);
      a03 = a03 + dot(ha, w3[0]) + dot(hc, w3[1]);
      a04 = a04 + dot(ha, w4[0]) + dot(hc, w4[1]);
      a05 = a05 + dot(ha, w5[0]) + dot(hc, w5[1]);
      a06 = a06 + dot(ha, w6[0]) + dot(hc, w6[1]);
      a07 = a07 + dot(ha, w7[0]) + dot(hc, w7[1]);
    }
    { let ha = HS[h1 + k / 4u]; let hc = HS[h1 + k / 4u + 1u];
      a10 = a10 + dot(ha, w0[0]) + dot(hc, w0[1]);
      a11 = a11 + dot(ha, w1[0]) + dot(hc, w1[1]);
      a12 = a12 + dot(ha, w2[0]) + dot(hc, w2[1]);
      a13 = a13 + dot(ha, w3[0]) + dot(hc, w3[1]);
      a14 = a14 + dot(ha, w4[0]) + dot(hc, w4[1]);
      a15 = a15 + dot(ha, w5[0]) + dot(hc, w5[1]);
      a16 = a16 + dot(ha, w6[0]) + dot(hc, w6[1]);
      a17 = a17 + dot(ha, w7[0]) + dot(hc, w7[1]);
    }
  }
  if (0u < rows) {
    let row = SORTED[row0 + 0u]; let tw = TW[pu(3u) + row];
    if (n0 + 0u < H) { YK[row * H + n0 + 0u] = a00 * tw; }
    if (n0 + 64u < H) { YK[row * H + n0 + 64u] = a01 * tw; }
    if (n0 + 128u < H) { YK[row * H + n0 + 128u] = a02 * tw; }
    if (n0 + 192u < H) { YK[row * H + n0 + 192u] = a03 * tw; }
    if (n0 + 256u < H) { YK[row * H + n0 + 256u] = a04 * tw; }
    if (n0 + 320u < H) { YK[row * H + n0 + 320u] = a05 * tw; }
    if (n0 + 384u < H) { YK[row * H + n0 + 384u] = a06 * tw; }
    if (n0 + 448u < H) { YK[row * H + n0 + 448u] = a07 * tw; }
  }
  if (1u < rows) {
    let row = SORTED[row0 + 1u]; let tw = TW[pu(3u) + row];
    if (n0 + 0u < H) { YK[row * H + n0 + 0u] = a10 * tw; }
    if (n0 + 64u < H) { YK[row * H + n0 + 64u] = a11 * tw; }
    if (n0 + 128u < H) { YK[row * H + n0 + 128u] = a12 * tw; }
    if (n0 + 192u < H) { YK[row * H + n0 + 192u] = a13 * tw; }
    if (n0 + 256u < H) { YK[row * H + n0 + 256u] = a14 * tw; }
    if (n0 + 320u < H) { YK[row * H + n0 + 320u] = a15 * tw; }
    if (n0 + 384u < H) { YK[row * H + n0 + 384u] = a16 * tw; }
    if (n0 + 448u < H) { YK[row * H + n0 + 448u] = a17 * tw; }
  }
}
