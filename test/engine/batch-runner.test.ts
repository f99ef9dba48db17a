import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceSession } from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchRunner } from "../../src/core/runner/batch-runner.ts";
import { KvSlots } from "../../src/core/runner/kv-slots.ts";
import { OrtDecoderSession } from "../../src/core/runner/ort-decoder-session.ts";
import { argmax, emptyPast, loadRaw, type RawDecoder, step } from "../convert/run-onnx.ts";
import { buildSyntheticModel, SYNTHETIC } from "../fixtures/synthetic-model.ts";

const shape = {
  layers: SYNTHETIC.layers,
  kvHeads: SYNTHETIC.kvHeads,
  headDim: SYNTHETIC.hidden / SYNTHETIC.heads,
};
const prompts = [
  [1, 40, 80, 120, 3, 200, 17],
  [5, 99, 150, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [260, 261],
];

/** Greedy continuation of one prompt on the plain growing-KV path (batch of one). */
async function reference(d: RawDecoder, prompt: number[], n: number): Promise<number[]> {
  let past = emptyPast(d);
  let ids = prompt;
  let len = 0;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await step(d, ids, past, len, 1);
    len += ids.length;
    past = r.past;
    const next = argmax(r.logits);
    out.push(next);
    ids = [next];
  }
  return out;
}

describe("BatchRunner over the shared KV cache", () => {
  let root: string;
  let raw: RawDecoder;
  let session: OrtDecoderSession;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-batch-"));
    const { modelDir } = await buildSyntheticModel(root, ["fp32"]);
    const path = join(modelDir, "onnx/model.onnx");
    raw = await loadRaw(path, shape.layers, shape.kvHeads, shape.headDim);
    session = new OrtDecoderSession(await InferenceSession.create(path, { intraOpNumThreads: 1 }));
  });

  afterAll(async () => {
    await raw?.session.release();
    await session?.release();
    rmSync(root, { recursive: true, force: true });
  });

  it("chunked prefill plus ragged batched decode gives each sequence's unbatched greedy output", async () => {
    const steps = 20;
    const expected = await Promise.all(prompts.map((p) => reference(raw, p, steps)));
    // Small initial capacity so the cache grows (re-layout) mid-run.
    const runner = new BatchRunner(
      session,
      new KvSlots(shape, { maxRows: 4, maxPositions: SYNTHETIC.contextLength, initialPositions: 8 }),
    );
    const lengths: number[] = [];
    const last: number[] = [];
    const outputs: number[][] = prompts.map(() => []);
    for (const [row, prompt] of prompts.entries()) {
      let done = 0;
      let logits: Float32Array | undefined;
      while (done < prompt.length) {
        const chunk = prompt.slice(done, done + 5);
        ({ logits } = await runner.prefill(row, chunk, done));
        done += chunk.length;
      }
      const first = argmax(logits!);
      outputs[row]!.push(first);
      last.push(first);
      lengths.push(prompt.length);
    }
    for (let s = 1; s < steps; s++) {
      const { logits, vocab } = await runner.decode(last, lengths);
      for (let r = 0; r < prompts.length; r++) {
        const next = argmax(logits.subarray(r * vocab, (r + 1) * vocab));
        outputs[r]!.push(next);
        last[r] = next;
        lengths[r]! += 1;
      }
    }
    expect(outputs).toEqual(expected);
  });

  it("onnxruntime-node's session as a DecoderSession: its inputs' types, and no unknown output", async () => {
    expect(session.ragged).toBe(false);
    expect(session.inputType("past_key_values.0.key")).toBe("float32");
    expect(session.inputType("input_ids")).toBe("int64");
    expect(session.inputType("nope")).toBeUndefined();
    // onnxruntime-node would read a record without an output name as run options: refused instead.
    await expect(session.run({}, { nope: null })).rejects.toThrow(/no output nope/);
    await expect(session.run({}, {})).rejects.toThrow(/at least one output/);
  });

  it("a row copied to another row continues identically (forks and compaction)", async () => {
    const runner = new BatchRunner(
      session,
      new KvSlots(shape, { maxRows: 3, maxPositions: SYNTHETIC.contextLength, initialPositions: 8 }),
    );
    const prompt = prompts[1]!;
    const { logits } = await runner.prefill(2, prompt, 0);
    runner.kv.copyRow(2, 0, prompt.length);
    const token = argmax(logits);
    const a = await runner.decode([token], [prompt.length]);
    const b = await runner.prefill(2, [token], prompt.length);
    expect(Array.from(a.logits)).toEqual(Array.from(b.logits));
  });
});
