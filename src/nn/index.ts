/** Neural-network building blocks (torch.nn and the layers transformers' models share). */
export * from "./module.js";
export * from "./layers.js";
export * from "./conv.js";
export * from "./group_norm.js";
export * from "./quantized.js";
export * from "./activations.js";
export * from "./attention.js";
export * from "./kv_cache.js";
export * from "./mlp.js";
export * from "./moe.js";
export * from "./gated_deltanet.js";
export * from "./rotary.js";
export * from "./kernel_hub.js";
