/**
 * The eager step that compile's rotary + KV-write fusion replaces (cpu and webgpu compile tests):
 * q's rotary (or a copy of q), k's rotary, and the paged KV write of the rotated key.
 */
import * as torch from "../../src/index.js";
import { pagedKVWrite } from "../../src/tensor/paged_attention.js";

/**
 * For `Hk` kv heads of `D`: (q, k, v, cos, sin, slots, kc, vc) -> [q'] or, with `keepKey`, [q', k'],
 * q' = rotary(q) (`withQuery`) or q * 1, k' = rotary(k) written at `slots` of the pools kc/vc with v.
 */
export function rotaryKVStep(Hk: number, D: number, withQuery: boolean, keepKey: boolean) {
  return (q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
    slots: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor): torch.Tensor[] => {
    const qr = withQuery ? torch.applyRotary(q, cos, sin) : q.mul(1);
    const kr = torch.applyRotary(k, cos, sin);
    pagedKVWrite(kr.reshape([k.shape[1], Hk, D]), v, kc, vc, slots);
    return keepKey ? [qr, kr] : [qr];
  };
}
