/**
 * Bad words as vLLM applies them: a word is a token sequence; its last token
 * is banned for the next step when the output so far ends with the word's
 * other tokens (a one-token word is always banned).
 */

export function banBadWords(
  row: Float32Array,
  words: readonly (readonly number[])[],
  outputTokenIds: readonly number[],
): void {
  const outLen = outputTokenIds.length;
  for (const word of words) {
    const prefixLen = word.length - 1;
    if (prefixLen < 0 || prefixLen > outLen) continue;
    let matches = true;
    for (let j = 0; j < prefixLen; j++) {
      if (outputTokenIds[outLen - prefixLen + j] !== word[j]) {
        matches = false;
        break;
      }
    }
    if (matches) row[word[prefixLen]] = Number.NEGATIVE_INFINITY;
  }
}
