/**
 * A fixed benchmark prompt of an exact token count, tokenized once with the
 * converted model's tokenizer so every engine sees the same ids.
 */
import { loadTransformersTokenizer } from "../src/core/runner/tokenizer.ts";

const PASSAGE =
  "The lighthouse keeper climbed the spiral stairs each evening, counting the steps as his father had " +
  "taught him. From the lamp room he could see the harbour, the fishing boats returning with the tide, and " +
  "the long line of cliffs that bent toward the north. He wrote the weather in a leather book: wind from " +
  "the west, a low grey sky, rain expected before midnight. Ships depended on the light, and the light " +
  "depended on him, so he polished the lens, trimmed the wick, and wound the clockwork that turned the " +
  "great beam across the water. ";

export async function benchPrompt(modelDir: string, tokens: number): Promise<number[]> {
  const tok = await loadTransformersTokenizer(modelDir);
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  let text = PASSAGE;
  let ids = encode(text);
  while (ids.length < tokens) {
    text += PASSAGE;
    ids = encode(text);
  }
  return ids.slice(0, tokens);
}
