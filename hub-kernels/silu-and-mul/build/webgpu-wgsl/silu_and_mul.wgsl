// y = silu(gate) * up = gate / (1 + exp(-gate)) * up, elementwise over n values.
// Params: 0 n, 1 gate offset, 2 up offset.
@group(0) @binding(1) var<storage, read> G: array<f32>;
@group(0) @binding(2) var<storage, read> U: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;

@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.y * nwg.x * 256u + gid.x;
  if (i >= pu(0u)) { return; }
  let g = G[pu(1u) + i];
  Y[i] = g / (1.0 + exp(-g)) * U[pu(2u) + i];
}
