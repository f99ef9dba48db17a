import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openGguf } from "../../src/models/gguf/reader.ts";
import { buildSyntheticModel, SYNTHETIC, syntheticVocabulary } from "../fixtures/synthetic-model.ts";
import { ReferenceLlama } from "./reference-llama.ts";
import { argmax, emptyPast, loadRaw, type RawDecoder, step } from "./run-onnx.ts";

const headDim = SYNTHETIC.hidden / SYNTHETIC.heads;
const prompt = [1, 40, 80, 120, 3, 200, 17, 260, 5, 99, 150, 42];

describe("converted decoder graph (synthetic llama)", () => {
  let root: string;
  let modelDir: string;
  let reference: number[][];
  let fp32: RawDecoder;
  let q4: RawDecoder;
  let q4Exact: RawDecoder;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "ortserve-convert-"));
    const built = await buildSyntheticModel(root);
    modelDir = built.modelDir;
    const file = openGguf(built.ggufPath);
    const ref = new ReferenceLlama(file, { ...SYNTHETIC, vocab: syntheticVocabulary().tokens.length });
    reference = ref.forward(prompt).map((r) => Array.from(r));
    file.close();
    fp32 = await loadRaw(join(modelDir, "onnx/model.onnx"), SYNTHETIC.layers, SYNTHETIC.kvHeads, headDim);
    q4 = await loadRaw(join(modelDir, "onnx/model_q4.onnx"), SYNTHETIC.layers, SYNTHETIC.kvHeads, headDim);
    const exact = await buildSyntheticModel(root, ["q4"], "synthetic-fp32-activations", 0);
    q4Exact = await loadRaw(
      join(exact.modelDir, "onnx/model_q4.onnx"),
      SYNTHETIC.layers,
      SYNTHETIC.kvHeads,
      headDim,
    );
  });

  /** Largest |onnx - reference| over all positions, relative to the largest reference logit. */
  async function relativeMaxError(d: RawDecoder): Promise<number> {
    const { logits, rows, vocab } = await step(d, prompt, emptyPast(d), 0);
    expect(rows).toBe(prompt.length);
    let maxDiff = 0;
    let scale = 0;
    for (let p = 0; p < rows; p++)
      for (let v = 0; v < vocab; v++) {
        maxDiff = Math.max(maxDiff, Math.abs(logits[p * vocab + v]! - reference[p]![v]!));
        scale = Math.max(scale, Math.abs(reference[p]![v]!));
      }
    expect(scale).toBeGreaterThan(1);
    return maxDiff / scale;
  }

  afterAll(async () => {
    await fp32?.session.release();
    await q4?.session.release();
    await q4Exact?.session.release();
    rmSync(root, { recursive: true, force: true });
  });

  it("fp32 logits equal an independent llama.cpp-order forward pass at every position", async () => {
    expect(await relativeMaxError(fp32)).toBeLessThan(1e-4);
  });

  it("q4 weights map GGUF blocks exactly (fp32 activations match the reference)", async () => {
    expect(await relativeMaxError(q4Exact)).toBeLessThan(1e-4);
  });

  it("q4 (MatMulNBits, int8 activations) stays close to the reference and keeps its argmax", async () => {
    const { logits, rows, vocab } = await step(q4, prompt, emptyPast(q4), 0);
    let agree = 0;
    let sumDiff = 0;
    let sumAbs = 0;
    for (let p = 0; p < rows; p++) {
      const row = logits.subarray(p * vocab, (p + 1) * vocab);
      if (argmax(row) === argmax(reference[p]!)) agree++;
      for (let v = 0; v < vocab; v++) {
        sumDiff += Math.abs(row[v]! - reference[p]![v]!);
        sumAbs += Math.abs(reference[p]![v]!);
      }
    }
    expect(sumDiff / sumAbs).toBeLessThan(0.05);
    expect(agree).toBeGreaterThanOrEqual(rows - 1);
  });

  it("decoding with the KV cache gives the logits of a full pass", async () => {
    for (const d of [fp32, q4]) {
      const full = await step(d, prompt, emptyPast(d), 0);
      const first = await step(d, prompt.slice(0, 7), emptyPast(d), 0);
      const rest = await step(d, prompt.slice(7), first.past, 7);
      const v = full.vocab;
      const lastFull = full.logits.subarray((prompt.length - 1) * v);
      const lastRest = rest.logits.subarray((rest.rows - 1) * v);
      let maxDiff = 0;
      for (let i = 0; i < v; i++) maxDiff = Math.max(maxDiff, Math.abs(lastFull[i]! - lastRest[i]!));
      expect(maxDiff).toBeLessThan(1e-3);
    }
  });

  it("num_logits_to_keep returns only the last rows, unchanged", async () => {
    const full = await step(fp32, prompt, emptyPast(fp32), 0);
    const kept = await step(fp32, prompt, emptyPast(fp32), 0, 2);
    expect(kept.rows).toBe(2);
    const v = full.vocab;
    const tail = full.logits.subarray((prompt.length - 2) * v);
    for (let i = 0; i < 2 * v; i++) expect(kept.logits[i]).toBeCloseTo(tail[i]!, 4);
  });

  it("loads in @huggingface/transformers offline and generates what the raw session generates", async () => {
    const { AutoModelForCausalLM, env, Tensor } = await import("@huggingface/transformers");
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = root;
    for (const dtype of ["fp32", "q4"] as const) {
      const model = await AutoModelForCausalLM.from_pretrained("synthetic-llama", { dtype });
      const input = new Tensor("int64", BigInt64Array.from(prompt.map(BigInt)), [1, prompt.length]);
      const mask = new Tensor("int64", new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]);
      const out = (await model.generate({
        input_ids: input,
        attention_mask: mask,
        max_new_tokens: 8,
        do_sample: false,
        eos_token_id: -1,
      } as never)) as { tolist(): bigint[][] };
      const generated = out.tolist()[0]!.slice(prompt.length).map(Number);

      const d = dtype === "fp32" ? fp32 : q4;
      const ours: number[] = [];
      let past = emptyPast(d);
      let ids = prompt;
      let len = 0;
      for (let i = 0; i < 8; i++) {
        const r = await step(d, ids, past, len);
        len += ids.length;
        past = r.past;
        const next = argmax(r.logits.subarray((r.rows - 1) * r.vocab));
        ours.push(next);
        ids = [next];
      }
      expect(generated).toEqual(ours);
      await model.dispose();
    }
  });
});
