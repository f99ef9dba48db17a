/**
 * Prompt tokenization that stops as soon as the prompt cannot fit: the text is encoded piece by
 * piece, cut only where a cut cannot change the tokens (a space between two ASCII letters: no
 * pre-token of a BPE or Metaspace tokenizer spans it), so the pieces' ids joined are the whole
 * text's ids. Each tokenizer is checked once (`slicesExactly`) and one whose pieces would differ
 * is encoded whole. A truncated prompt (keep the last N tokens) encodes only a suffix long enough
 * to hold N tokens.
 */

/** Text → ids without special tokens, and the ids `add_special_tokens` puts around any text. */
export interface PieceEncoder {
  encode(text: string): number[];
  /** Added before and after the text's own ids when special tokens are asked for. */
  specials: { before: number[]; after: number[] };
  /** Whether cutting at `safeCuts` keeps every token (see slicesExactly). */
  sliceable: boolean;
}

export type BoundedIds =
  | { ids: number[] }
  /** Stopped early: the prompt has more than `limit` tokens (`atLeast` of them counted). */
  | { exceeded: true; atLeast: number };

/** Characters per piece: small enough that encoding stops soon after the limit is passed. */
export const PIECE_CHARS = 4096;

const letter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/** The first safe cut at or after `from` (a space between two ASCII letters), or -1. */
function safeCutFrom(text: string, from: number): number {
  for (let i = Math.max(from, 1); i < text.length - 1; i++)
    if (text.charCodeAt(i) === 32 && letter(text.charCodeAt(i - 1)) && letter(text.charCodeAt(i + 1)))
      return i;
  return -1;
}

/** The last safe cut at or before `to`, or -1. */
function safeCutBefore(text: string, to: number): number {
  for (let i = Math.min(to, text.length - 2); i >= 1; i--)
    if (text.charCodeAt(i) === 32 && letter(text.charCodeAt(i - 1)) && letter(text.charCodeAt(i + 1)))
      return i;
  return -1;
}

/**
 * The text in pieces of about `size` characters, each ending at a safe cut (the last at the end).
 * Debt: a stretch with no safe cut (a run of one letter, digits, punctuation) is one piece however
 * long; only the size bound limits it (in the tokenizer's thread, so no step waits for it).
 */
export function* pieces(text: string, size = PIECE_CHARS): Generator<string> {
  let start = 0;
  while (text.length - start > size) {
    const cut = safeCutFrom(text, start + size);
    if (cut < 0) break;
    yield text.slice(start, cut);
    start = cut;
  }
  yield text.slice(start);
}

/**
 * The prompt's ids, or `exceeded` once more than `limit` tokens are counted. With `keepLast`, the
 * last that many tokens (special tokens after the text included), no limit applies, and only a
 * suffix of at least `keepLast` x `maxBytesPerToken` characters (which holds that many tokens) is
 * encoded.
 */
export function encodeBounded(
  enc: PieceEncoder,
  text: string,
  addSpecialTokens: boolean,
  opts: { limit: number; keepLast?: number; maxBytesPerToken: number },
): BoundedIds {
  const before = addSpecialTokens ? enc.specials.before : [];
  const after = addSpecialTokens ? enc.specials.after : [];
  if (opts.keepLast !== undefined) {
    const need = opts.keepLast * opts.maxBytesPerToken;
    const cut = enc.sliceable && text.length > need ? safeCutBefore(text, text.length - need) : -1;
    const ids =
      cut < 0 ? [...before, ...enc.encode(text), ...after] : [...enc.encode(text.slice(cut)), ...after];
    return { ids };
  }
  if (!enc.sliceable) {
    const ids = [...before, ...enc.encode(text), ...after];
    return ids.length > opts.limit ? { exceeded: true, atLeast: ids.length } : { ids };
  }
  const ids = [...before];
  for (const piece of pieces(text)) {
    for (const id of enc.encode(piece)) ids.push(id);
    if (ids.length + after.length > opts.limit) return { exceeded: true, atLeast: ids.length + after.length };
  }
  for (const id of after) ids.push(id);
  return { ids };
}

/** Text that exercises what a cut could break: words, digits, punctuation, runs of spaces, non-ASCII. */
const CHECK_TEXT =
  "Hello world, it's 2024-05-17 and  the  sea   is calm.\n\nThe keeper's lamp (no. 42) shone: naïve café " +
  "résumé — 東京 and Zürich; tabs\tand\ttext, a b c d e f g, don't won't, x=y+z*3.14 END";

/** Whether encoding `CHECK_TEXT` in pieces cut at every safe cut gives the same ids as whole. */
export function slicesExactly(encode: (text: string) => number[], probe: readonly string[] = []): boolean {
  for (const text of [CHECK_TEXT, ...probe]) {
    const whole = encode(text);
    const joined = [...pieces(text, 1)].flatMap((p) => encode(p));
    if (whole.length !== joined.length || whole.some((id, i) => id !== joined[i])) return false;
  }
  return true;
}
