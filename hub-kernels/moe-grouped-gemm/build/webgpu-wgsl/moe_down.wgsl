// Pass 3 of 4 — one grouped GEMM for the down projection of all experts, laid out as pass 2 (one
// column n per invocation, the tile's rows of HS read uniformly), with the top-k weighting and the
// scatter back fused in the epilogue: YK[r, n] = topk_weight[r] * (HS[position] . down[e, n]) for
// the routed row r of each sorted position. Needs I % 8 == 0 and 8-aligned offsets.
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
  let t = wid.y;
  if (t >= TILES[0]) { return; }
  let H = pu(0u); let I = pu(1u);
  let e = TILES[1u + 3u * t]; let row0 = TILES[2u + 3u * t]; let rows = TILES[3u + 3u * t];
  let n = wid.x * 64u + lid;
  if (n >= H) { return; }
  var acc: array<f32, 16>;
  let wb = pu(2u) + (e * H + n) * I;
  for (var k = 0u; k < I; k = k + 8u) {
    let w = w8(wb + k);
    for (var r = 0u; r < rows; r = r + 1u) {
      let hb = (row0 + r) * (I / 4u) + k / 4u;
      acc[r] = acc[r] + dot(HS[hb], w[0]) + dot(HS[hb + 1u], w[1]);
    }
  }
  for (var r = 0u; r < rows; r = r + 1u) {
    let row = SORTED[row0 + r];
    YK[row * H + n] = acc[r] * TW[pu(3u) + row];
  }
}
