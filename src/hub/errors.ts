/** Errors of the hub layer: one class for bad checkpoint files, one for the Hub and its cache. */

/** A checkpoint file (safetensors, index, config.json) is missing or malformed; the message names it. */
export class CheckpointError extends Error {
  override name = "CheckpointError";
}

/**
 * A model id could not be resolved to a local folder: bad id, missing folder, unknown model on the
 * Hub, Hub unreachable or offline without a cached copy. `cause` holds the underlying error if any.
 */
export class HubError extends Error {
  override name = "HubError";
}
