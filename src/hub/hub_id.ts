/** Hugging Face Hub model ids, as huggingface_hub validates them. */

/** "org/name": word characters, "-" and "." (not at either end), no "--" or "..", at most 96 characters. */
export function isHubId(id: string): boolean {
  return /^(?:\w|\w[\w.-]*\w)\/(?:\w|\w[\w.-]*\w)$/.test(id) && !/--|\.\./.test(id) && id.length <= 96;
}
