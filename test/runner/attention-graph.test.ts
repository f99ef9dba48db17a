/** The graph rewrite that puts ortserve's attention kernel in place of GroupQueryAttention. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { weightPath } from "../../src/core/model/model-files.ts";
import {
  ATTENTION_DOMAIN,
  ATTENTION_OP,
  cachedAttentionModel,
  describeModel,
  type NodeSummary,
  withCachedAttention,
} from "../../src/core/runner/attention-graph.ts";
import { BLOCK_OFFSET_OP } from "../../src/core/runner/block-offset-graph.ts";
import { buildSyntheticModel, SYNTHETIC } from "../fixtures/synthetic-model.ts";

let root: string;
let modelPath: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "ortserve-attention-graph-"));
  const { modelDir } = await buildSyntheticModel(root, ["q4"]);
  modelPath = weightPath(modelDir, "q4");
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("withCachedAttention", () => {
  it("replaces every GroupQueryAttention node, keeping its tensors, and imports the ortserve domain", () => {
    const original = describeModel(readFileSync(modelPath));
    const rewritten = describeModel(withCachedAttention(readFileSync(modelPath))!);
    const gqa = original.nodes.filter((n) => n.opType === "GroupQueryAttention");
    const ours = rewritten.nodes.filter((n) => n.opType === ATTENTION_OP);
    expect(gqa).toHaveLength(SYNTHETIC.layers);
    expect(ours).toHaveLength(SYNTHETIC.layers);
    expect(rewritten.nodes.some((n) => n.opType === "GroupQueryAttention")).toBe(false);
    ours.forEach((n, l) => {
      const g = gqa[l]!;
      expect(n.domain).toBe(ATTENTION_DOMAIN);
      // qkv, past K/V, seqlens_k, cos, sin, position ids: GroupQueryAttention's 0, 3-5, 7-9.
      expect(n.inputs).toEqual([0, 3, 4, 5, 7, 8, 9].map((i) => g.inputs[i]));
      expect(n.outputs).toEqual(g.outputs);
    });
    // Every other node is untouched, in order (the fused offset subgraphs aside: see below).
    const producer = (name: string) => original.nodes.find((n) => n.outputs.includes(name))!;
    const fusedAway = new Set(
      rewritten.nodes
        .filter((n) => n.opType === BLOCK_OFFSET_OP)
        .flatMap((n) => {
          const add = producer(n.outputs[0]!);
          return [add, ...add.inputs.map(producer)];
        }),
    );
    const others = (m: typeof original) =>
      m.nodes.filter(
        (n) =>
          !fusedAway.has(n) && ![ATTENTION_OP, BLOCK_OFFSET_OP, "GroupQueryAttention"].includes(n.opType),
      );
    expect(others(rewritten)).toEqual(others(original));
    expect(rewritten.opsets.get(ATTENTION_DOMAIN)).toBe(1);
    for (const [domain, version] of original.opsets) expect(rewritten.opsets.get(domain)).toBe(version);
  });

  it("fuses each Q4_1 projection's Split, MatMul and Add into one BlockOffsetAdd over the same tensors", () => {
    const original = describeModel(readFileSync(modelPath));
    const rewritten = describeModel(withCachedAttention(readFileSync(modelPath))!);
    const fused = rewritten.nodes.filter((n) => n.opType === BLOCK_OFFSET_OP);
    // The synthetic model's first layer is Q4_1: packed QKV, o_proj, packed gate/up, down_proj.
    expect(fused).toHaveLength(4);
    const producer = (name: string) => original.nodes.find((n) => n.outputs.includes(name))!;
    for (const n of fused) {
      expect(n.domain).toBe(ATTENTION_DOMAIN);
      const add = producer(n.outputs[0]!);
      expect(add.opType).toBe("Add");
      const [split, matmul] = add.inputs.map(producer) as [NodeSummary, NodeSummary];
      expect(split.opType).toBe("Split");
      expect(matmul.opType).toBe("MatMul");
      expect(matmul.inputs[0]).toBe(split.outputs[1]);
      // BlockOffsetAdd(projection with its block sums, offsets C).
      expect(n.inputs).toEqual([split.inputs[0], matmul.inputs[1]]);
    }
    // The Q4_0 layer has no offset subgraph; no Split, MatMul or Add of the Q4_1 layer is left.
    expect(rewritten.nodes.filter((n) => n.opType === "MatMul")).toHaveLength(0);
    expect(original.nodes.filter((n) => n.opType === "MatMul")).toHaveLength(4);
  });

  it("leaves a graph without GroupQueryAttention alone", () => {
    const once = withCachedAttention(readFileSync(modelPath))!;
    expect(withCachedAttention(once)).toBeUndefined();
  });

  it("writes the rewritten graph beside the model, and replaces a stale copy", () => {
    const expected = Buffer.from(withCachedAttention(readFileSync(modelPath))!);
    const path = cachedAttentionModel(modelPath)!;
    expect(path).toBe(join(root, "synthetic-llama", "onnx", ".model_q4.cached-attention.onnx"));
    expect(readFileSync(path).equals(expected)).toBe(true);
    // A copy left by an earlier conversion of the model.
    writeFileSync(path, "stale");
    expect(cachedAttentionModel(modelPath)).toBe(path);
    expect(readFileSync(path).equals(expected)).toBe(true);
  });
});
