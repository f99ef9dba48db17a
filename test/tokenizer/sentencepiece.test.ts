/**
 * The SentencePiece ("llama") path against llama.cpp on a synthetic scored vocabulary, with and
 * without add_space_prefix (Llama-style and Gemma-style files).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tokenizerCorpus } from "../fidelity/tokenizer-corpus.ts";
import { compareTokenizers, decodeOurs, decodeReference, encodeOurs, loadPair } from "./parity.ts";
import { writeSpmGguf } from "./spm-fixture.ts";

const dir = mkdtempSync(join(tmpdir(), "ortserve-spm-"));
const ggufPath = writeSpmGguf(join(dir, "spm.gguf"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.each([true, false])("SentencePiece vocabulary, add_space_prefix %s", (addSpacePrefix) => {
  it("matches llama.cpp on the corpus", async () => {
    const pair = await loadPair(ggufPath, { "tokenizer.ggml.add_space_prefix": addSpacePrefix });
    try {
      const report = compareTokenizers(pair, tokenizerCorpus);
      expect(report.firstMismatch).toBeUndefined();
      // transformers.js's ByteFallback decoder drops a U+FEFF rebuilt from byte tokens (its
      // TextDecoder strips BOMs); ids are unaffected, and it is the only decoding difference.
      const decodeDiffs = tokenizerCorpus.filter((text) => {
        const ids = encodeOurs(pair.ours, text);
        return decodeOurs(pair.ours, ids) !== decodeReference(pair.reference, ids);
      });
      expect(decodeDiffs.every((t) => t.includes("\ufeff"))).toBe(true);
      // BOS is added by default for SentencePiece files, like llama.cpp's add_special.
      expect(pair.ours.encode("Hello")).toEqual([1, ...encodeOurs(pair.ours, "Hello")]);
    } finally {
      await pair.reference.dispose();
    }
  });
});
