/**
 * tsorch/transformers in browsers (package.json "exports", condition "browser"): the API of
 * ../transformers/index.ts; models and tokenizers load from a URL base or a Hub id over fetch,
 * cached with the Cache API (../hub/fetch_source.ts).
 */
import "./environment.js";
export * from "../transformers/api.js";
