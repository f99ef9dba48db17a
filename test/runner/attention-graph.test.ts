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
  TOKEN_ROWS,
  withCachedAttention,
} from "../../src/core/runner/attention-graph.ts";
import { BLOCK_OFFSET_OP, BLOCK_OFFSET_SWIGLU_OP, SWIGLU_OP } from "../../src/core/runner/epilogue-graph.ts";
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
      // qkv, past K/V, seqlens_k, cos, sin, position ids: GroupQueryAttention's 0, 3-5, 7-9;
      // then the ragged form's token rows.
      expect(n.inputs).toEqual([...[0, 3, 4, 5, 7, 8, 9].map((i) => g.inputs[i]), TOKEN_ROWS]);
      expect(n.outputs).toEqual(g.outputs);
    });
    // Every other node is untouched, in order; what went is only what the epilogues fuse (below).
    const key = (n: NodeSummary) => JSON.stringify(n);
    const ortserveOps = new Set([ATTENTION_OP, BLOCK_OFFSET_OP, SWIGLU_OP, BLOCK_OFFSET_SWIGLU_OP]);
    const kept = rewritten.nodes.filter((n) => !ortserveOps.has(n.opType));
    const keptKeys = new Set(kept.map(key));
    expect(original.nodes.filter((n) => keptKeys.has(key(n)))).toEqual(kept);
    const gone = original.nodes.filter((n) => !keptKeys.has(key(n))).map((n) => n.opType);
    expect(new Set(gone)).toEqual(
      new Set(["GroupQueryAttention", "Split", "MatMul", "Add", "Sigmoid", "Mul"]),
    );
    expect(rewritten.opsets.get(ATTENTION_DOMAIN)).toBe(1);
    for (const [domain, version] of original.opsets) expect(rewritten.opsets.get(domain)).toBe(version);
  });

  it("fuses each projection's offset term and the MLP's SwiGLU into one operator over the same tensors", () => {
    const original = describeModel(readFileSync(modelPath));
    const rewritten = describeModel(withCachedAttention(readFileSync(modelPath))!);
    const producer = (name: string) => original.nodes.find((n) => n.outputs.includes(name))!;
    const of = (op: string) => rewritten.nodes.filter((n) => n.opType === op);
    for (const n of rewritten.nodes.filter((x) => x.opType !== ATTENTION_OP && x.domain === ATTENTION_DOMAIN))
      expect([BLOCK_OFFSET_OP, SWIGLU_OP, BLOCK_OFFSET_SWIGLU_OP]).toContain(n.opType);
    // The synthetic model's first layer is Q4_1 (offset terms after packed QKV, o_proj, down_proj,
    // and one with the SwiGLU after gate/up); its second is Q4_0 (a SwiGLU only).
    expect(of(BLOCK_OFFSET_OP)).toHaveLength(3);
    expect(of(BLOCK_OFFSET_SWIGLU_OP)).toHaveLength(1);
    expect(of(SWIGLU_OP)).toHaveLength(1);
    /** The offset term's inputs as the original graph had them: [projection with sums, offsets C]. */
    const offsetInputs = (add: NodeSummary) => {
      expect(add.opType).toBe("Add");
      const [split, matmul] = add.inputs.map(producer) as [NodeSummary, NodeSummary];
      expect([split.opType, matmul.opType]).toEqual(["Split", "MatMul"]);
      expect(matmul.inputs[0]).toBe(split.outputs[1]);
      return [split.inputs[0], matmul.inputs[1]];
    };
    /** The SwiGLU's input as the original graph had it: the gate/up tensor its Split reads. */
    const swigluInput = (act: NodeSummary) => {
      expect(act.opType).toBe("Mul");
      const [silu, up] = act.inputs.map(producer) as [NodeSummary, NodeSummary];
      expect([silu.opType, up.opType]).toEqual(["Mul", "Split"]);
      expect(
        silu.inputs
          .map(producer)
          .map((n) => n.opType)
          .sort(),
      ).toEqual(["Sigmoid", "Split"]);
      return up.inputs[0]!;
    };
    for (const n of of(BLOCK_OFFSET_OP)) expect(n.inputs).toEqual(offsetInputs(producer(n.outputs[0]!)));
    for (const n of of(SWIGLU_OP)) expect(n.inputs).toEqual([swigluInput(producer(n.outputs[0]!))]);
    for (const n of of(BLOCK_OFFSET_SWIGLU_OP))
      expect(n.inputs).toEqual(offsetInputs(producer(swigluInput(producer(n.outputs[0]!)))));
    // No node of the fused subgraphs is left, nor the Split sizes only they read.
    for (const op of ["MatMul", "Sigmoid", "Split"])
      expect(rewritten.nodes.some((n) => n.opType === op)).toBe(false);
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
