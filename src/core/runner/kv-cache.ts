/**
 * Per-sequence KV cache over the Optimum decoder-with-past contract:
 * `past_key_values.{i}.key|value` in, `present.{i}.key|value` out, all
 * float32 [batch, kv_heads, length, head_dim]. The presents of one step become
 * the pasts of the next; the replaced tensors are disposed right away.
 */
import { Tensor } from "onnxruntime-node";

export interface KvLayout {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
}

const KINDS = ["key", "value"] as const;

export function pastName(layer: number, kind: "key" | "value"): string {
  return `past_key_values.${layer}.${kind}`;
}

export function presentName(layer: number, kind: "key" | "value"): string {
  return `present.${layer}.${kind}`;
}

/** All past input names in feed order. */
export function pastNames(numLayers: number): string[] {
  const names: string[] = [];
  for (let i = 0; i < numLayers; i++) for (const k of KINDS) names.push(pastName(i, k));
  return names;
}

/** All present output names, matching `pastNames` index for index. */
export function presentNames(numLayers: number): string[] {
  const names: string[] = [];
  for (let i = 0; i < numLayers; i++) for (const k of KINDS) names.push(presentName(i, k));
  return names;
}

export class KvCache {
  readonly layout: KvLayout;
  #length = 0;
  #past: Tensor[];
  #pastNames: string[];
  #presentNames: string[];

  constructor(layout: KvLayout) {
    this.layout = layout;
    this.#pastNames = pastNames(layout.numLayers);
    this.#presentNames = presentNames(layout.numLayers);
    this.#past = this.#pastNames.map(() => emptyKv(layout));
  }

  /** Number of cached positions. */
  get length(): number {
    return this.#length;
  }

  /** The past inputs for the next run. */
  feeds(): Record<string, Tensor> {
    const feeds: Record<string, Tensor> = {};
    this.#pastNames.forEach((name, i) => {
      feeds[name] = this.#past[i];
    });
    return feeds;
  }

  /** Names of the outputs `advance` consumes; fetch exactly these plus logits. */
  get outputNames(): readonly string[] {
    return this.#presentNames;
  }

  /** Adopt the presents of a run that appended `added` positions. */
  advance(outputs: Record<string, Tensor>, added: number): void {
    const expected = this.#length + added;
    const next = this.#presentNames.map((name) => {
      const t = outputs[name];
      if (!t) throw new Error(`decoder output "${name}" missing`);
      if (t.dims[2] !== expected) {
        throw new Error(`decoder output "${name}" has ${t.dims[2]} positions, expected ${expected}`);
      }
      return t;
    });
    for (const t of this.#past) t.dispose();
    this.#past = next;
    this.#length = expected;
  }

  dispose(): void {
    for (const t of this.#past) t.dispose();
    this.#past = [];
    this.#length = 0;
  }
}

function emptyKv(layout: KvLayout): Tensor {
  return new Tensor("float32", new Float32Array(0), [1, layout.numKvHeads, 0, layout.headDim]);
}
