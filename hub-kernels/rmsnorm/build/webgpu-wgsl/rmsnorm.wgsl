// y = x * rsqrt(mean(x^2) + eps) * (offset + w) over the last axis: one workgroup of 64 per row.
// Params: 0 rows, 1 H, 2 eps (f32), 3 offset (f32), 4 x offset, 5 weight offset.
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
var<workgroup> part: array<f32, 64>;

fn ld_w(i: u32) -> f32 {
  if (weight_DTYPE == 0u) { return bitcast<f32>(W[i]); }
  let word = W[i >> 1u];
  let h = select(word & 0xffffu, word >> 16u, (i & 1u) == 1u);
  if (weight_DTYPE == 2u) { return bitcast<f32>(h << 16u); }
  return unpack2x16float(h).x;
}

@compute @workgroup_size(64) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * 65535u + wid.x;
  if (row >= pu(0u)) { return; }
  let H = pu(1u);
  let xb = pu(4u) + row * H;
  var s = 0.0;
  for (var i = lid; i < H; i = i + 64u) { let v = X[xb + i]; s = fma(v, v, s); }
  part[lid] = s;
  workgroupBarrier();
  for (var w = 32u; w > 0u; w = w >> 1u) {
    if (lid < w) { part[lid] = part[lid] + part[lid + w]; }
    workgroupBarrier();
  }
  let scale = inverseSqrt(part[0] / f32(H) + pf(2u));
  for (var i = lid; i < H; i = i + 64u) { Y[row * H + i] = X[xb + i] * scale * (pf(3u) + ld_w(pu(5u) + i)); }
}
