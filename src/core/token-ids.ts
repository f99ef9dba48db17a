/** The one vocabulary check: token ids from requests and prompts against the model's vocabulary. */
import { RequestError } from "./request-error.ts";

/** The ids that are not integers in [0, vocab), in order. */
export function outOfVocab(ids: ArrayLike<number> | undefined, vocab: number): number[] {
  const bad: number[] = [];
  if (!ids) return bad;
  // An indexed loop: a 100,000-id prompt is checked on the thread that serves every stream's chunks.
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= vocab) bad.push(id);
  }
  return bad;
}

/** Bad ids an error lists before it counts the rest. */
const IDS_LISTED = 20;

/** vLLM's check of a request's token-id field; the error names the field. */
export function checkTokenIds(param: string, ids: ArrayLike<number> | undefined, vocab: number): void {
  const bad = outOfVocab(ids, vocab);
  if (!bad.length) return;
  // vLLM lists every bad id; a request may carry a vocabulary's worth, so the list is cut short.
  const listed =
    bad.length > IDS_LISTED
      ? `${bad.slice(0, IDS_LISTED).join(", ")}, and ${bad.length - IDS_LISTED} more`
      : bad.join(", ");
  throw new RequestError(
    "invalid_request",
    `token_id(s) [${listed}] in ${param} contain out-of-vocab token ids. Vocabulary size: ${vocab}`,
    param,
  );
}
