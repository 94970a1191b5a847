/**
 * The model the package ships (models/stories260K: Karpathy's llama2.c TinyStories model, MIT; see
 * its README), used by generate, forward and serve when they get no --model: it works offline,
 * without ../shared or the Hub.
 */
import { fileURLToPath } from "node:url";

export const DEFAULT_MODEL = fileURLToPath(new URL("../../../models/stories260K", import.meta.url));
/** The name `tsorch serve` gives the shipped model (/v1/models) unless --served-model-name says otherwise. */
export const DEFAULT_MODEL_NAME = "stories260K";
