// Pass 2 of 4 — one grouped GEMM for the gate and up projections of all experts. Workgroup (x, y)
// takes tile y (up to 16 sorted rows of one expert); each invocation owns one column n of both
// projections and streams its two weight rows 8 values at a time, while the tile's token rows are
// read by every invocation alike (uniform loads). Epilogue: HS[position, n] = silu(gate) * up.
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

@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.y;
  if (t >= TILES[0]) { return; }
  let K = pu(0u); let H = pu(1u); let I = pu(2u);
  let e = TILES[1u + 3u * t]; let row0 = TILES[2u + 3u * t]; let rows = TILES[3u + 3u * t];
  let n = wid.x * 64u + lid;
  if (n >= I) { return; }
  var xb: array<u32, 16>;
  for (var r = 0u; r < rows; r = r + 1u) { xb[r] = pu(3u) / 4u + (SORTED[row0 + r] / K) * (H / 4u); }
  var ag: array<f32, 16>;
  var au: array<f32, 16>;
  let gb = pu(4u) + (e * 2u * I + n) * H;
  let ub = gb + I * H;
  for (var k = 0u; k < H; k = k + 8u) {
    let g = w8(gb + k); let u = w8(ub + k);
    for (var r = 0u; r < rows; r = r + 1u) {
      let xa = X[xb[r] + k / 4u]; let xc = X[xb[r] + k / 4u + 1u];
      ag[r] = ag[r] + dot(xa, g[0]) + dot(xc, g[1]);
      au[r] = au[r] + dot(xa, u[0]) + dot(xc, u[1]);
    }
  }
  for (var r = 0u; r < rows; r = r + 1u) {
    let a = ag[r];
    HS[(row0 + r) * I + n] = a / (1.0 + exp(-a)) * au[r];
  }
}
