// Pass 1 of 4 — sort the R = T*K routed rows by expert (one workgroup): count rows per expert,
// prefix-sum them into group offsets, cut each group into tiles of up to 2 rows
// (TILES[0] = count, then (expert, first sorted position, rows) per tile), and write
// SORTED[position] = routed row r (= token * K + slot).
// Params: 0 R, 1 E, 2 topk_ids offset.
@group(0) @binding(1) var<storage, read> IDS: array<i32>;
@group(0) @binding(2) var<storage, read_write> TILES: array<u32>;
@group(0) @binding(3) var<storage, read_write> SORTED: array<u32>;
var<workgroup> cnt: array<atomic<u32>, 1024>;

@compute @workgroup_size(256) fn main(@builtin(local_invocation_index) lid: u32) {
  let R = pu(0u); let E = pu(1u);
  for (var e = lid; e < E; e = e + 256u) { atomicStore(&cnt[e], 0u); }
  workgroupBarrier();
  for (var r = lid; r < R; r = r + 256u) { atomicAdd(&cnt[min(u32(IDS[pu(2u) + r]), E - 1u)], 1u); }
  workgroupBarrier();
  if (lid == 0u) {
    var at = 0u;
    var nt = 0u;
    for (var e = 0u; e < E; e = e + 1u) {
      let c = atomicLoad(&cnt[e]);
      for (var s = 0u; s < c; s = s + 2u) {
        TILES[1u + 3u * nt] = e; TILES[2u + 3u * nt] = at + s; TILES[3u + 3u * nt] = min(2u, c - s);
        nt = nt + 1u;
      }
      atomicStore(&cnt[e], at);
      at = at + c;
    }
    TILES[0] = nt;
  }
  workgroupBarrier();
  for (var r = lid; r < R; r = r + 256u) {
    let pos = atomicAdd(&cnt[min(u32(IDS[pu(2u) + r]), E - 1u)], 1u);
    SORTED[pos] = r;
  }
}
