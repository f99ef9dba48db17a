/** The one vocabulary check: token ids from requests and prompts against the model's vocabulary. */
import { RequestError } from "./request-error.ts";

/** The ids that are not integers in [0, vocab), in order. */
export function outOfVocab(ids: Iterable<number> | undefined, vocab: number): number[] {
  const bad: number[] = [];
  for (const id of ids ?? []) if (!Number.isInteger(id) || id < 0 || id >= vocab) bad.push(id);
  return bad;
}

/** vLLM's check of a request's token-id field; the error names the field. */
export function checkTokenIds(param: string, ids: readonly number[] | undefined, vocab: number): void {
  const bad = outOfVocab(ids, vocab);
  if (bad.length)
    throw new RequestError(
      "invalid_request",
      `token_id(s) [${bad.join(", ")}] in ${param} contain out-of-vocab token ids. Vocabulary size: ${vocab}`,
      param,
    );
}
