/**
 * The `model.vocab` object. Null-prototype so a token spelled "__proto__" is an ordinary key;
 * JSON.stringify and JSON.parse both keep it as one.
 */
export function vocabObject(tokens: readonly string[]): Record<string, number> {
  const vocab: Record<string, number> = Object.create(null);
  tokens.forEach((t, id) => {
    vocab[t] = id;
  });
  return vocab;
}
