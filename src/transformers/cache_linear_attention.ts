/**
 * The state a linear-attention layer (Gated DeltaNet) carries across forward steps, in place of
 * keys and values: transformers' LinearAttention cache layer (conv_states / recurrent_states).
 * Its size does not grow with the sequence, so dynamic and static caches hold the same state.
 */
import type { Tensor } from "../tensor/tensor.js";

export class LinearAttentionState {
  /** The last (kernel - 1) inputs of the causal depthwise conv1d [B, kernel - 1, channels]; null before the first step. */
  conv: Tensor | null = null;
  /** The delta-rule memory [B, Hv, Dk, Dv]; null before the first step. */
  recurrent: Tensor | null = null;
}
