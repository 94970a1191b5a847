// Pass 4 of 4 — y[t, n] = sum over the K slots of token t of YK[t * K + j, n] (slot order, so the
// result does not depend on the order rows were sorted in).
// Params: 0 T*H, 1 K, 2 H.
@group(0) @binding(1) var<storage, read> YK: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;

@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.y * nwg.x * 256u + gid.x;
  if (i >= pu(0u)) { return; }
  let K = pu(1u); let H = pu(2u);
  let t = i / H; let n = i % H;
  var s = 0.0;
  for (var j = 0u; j < K; j = j + 1u) { s = s + YK[(t * K + j) * H + n]; }
  Y[i] = s;
}
