/**
 * The decoder graph with ortserve's own attention kernel: every GroupQueryAttention node of the
 * converted graph (packed QKV, rotary from cos/sin caches at position_ids, past and present one
 * buffer) becomes `ortserve.CachedAttention` over the same tensors, which the native session
 * registers (native/src/attention.cc). ONNX Runtime's kernel packs every cached key for a one-row
 * GEMM per query head, so a decode step pays far more per cached position than reading it.
 * The same rewrite fuses what follows each projection (the Q4_1 offset term, the MLP's SwiGLU)
 * into the native epilogue operators (epilogue-graph.ts).
 *
 * The model file stays as converted (onnxruntime-node, which cannot register the kernel, loads
 * it); the rewritten graph, a few hundred KB, is written beside it as a hidden file sharing its
 * external data.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { threadId } from "node:worker_threads";
import { Tensor } from "onnxruntime-node";
import { ACTIVATION_BLOCKS_METADATA, fuseEpilogues } from "./epilogue-graph.ts";
import type { KvDtype } from "./kv-rows.ts";
import { cacheRowElements } from "./kv-slots.ts";
import { concat, fields, lengthDelimited, readVarint, stringField, text, varint } from "./proto-fields.ts";

export const ATTENTION_DOMAIN = "ortserve";
export const ATTENTION_OP = "CachedAttention";
/** The same kernel over a cache of IEEE binary16 (ONNX float16): half the bytes per cached position. */
export const ATTENTION_OP_HALF = "CachedAttentionHalf";
/**
 * The same kernel over an 8-bit cache (ONNX int8): a position's head_dim values as signed bytes,
 * then a binary16 scale per block of 32, head_dim + head_dim / 16 bytes where float16 takes
 * 2 head_dim.
 */
export const ATTENTION_OP_INT8 = "CachedAttentionInt8";

export interface AttentionGraphOptions {
  /**
   * The KV cache's element type (default float32): past_key_values.* and present.* are declared
   * so, with the int8 cache's last dimension widened by its scale.
   */
  cacheDtype?: KvDtype;
  /** Replace MatMulNBits with ortserve's BlockQuantMatMul (epilogue-graph.ts). */
  quantMatMul?: boolean;
}

const FLOAT = 1;
const INT8 = 3;
const FLOAT16 = 10;
const OPS: Record<KvDtype, string> = {
  float32: ATTENTION_OP,
  float16: ATTENTION_OP_HALF,
  int8: ATTENTION_OP_INT8,
};

/** GroupQueryAttention's inputs the kernel takes, by index: qkv, past K/V, seqlens_k, cos, sin, positions. */
const KEPT_INPUTS = [0, 3, 4, 5, 7, 8, 9];

/**
 * The rewritten graph's one new input, the kernel's eighth: the cache row of each new token, for a
 * forward pass whose rows bring different numbers of tokens (decode rows and a prompt chunk
 * together: input_ids and position_ids [1, tokens] in that order, attention_mask and the caches
 * over the rows). Empty: the batch form, a run of the graph as converted. The native session feeds
 * it empty when its caller does not (`rewrittenInputDefaults`): as an initializer-backed default
 * it would make ONNX Runtime warn at every session start.
 */
export const TOKEN_ROWS = "token_rows";
const INT64 = 7;

/** What a run of the rewritten graph is fed for the inputs the rewrite added, unless given. */
export function rewrittenInputDefaults(): Record<string, Tensor> {
  return { [TOKEN_ROWS]: new Tensor("int64", new BigInt64Array(0), [0]) };
}

// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
function rewriteNode(node: Uint8Array, opType: string): Uint8Array | undefined {
  const fs = fields(node);
  const original = text(fs.find((f) => f.number === 4)?.payload);
  const domain = text(fs.find((f) => f.number === 7)?.payload);
  if (original !== "GroupQueryAttention" || domain !== "com.microsoft") return undefined;
  const inputs = fs.filter((f) => f.number === 1).map((f) => text(f.payload));
  // Only the form the converter emits (packed QKV, no separate K and V): anything else keeps ORT's kernel.
  if (inputs.length !== 10 || inputs[1] !== "" || inputs[2] !== "")
    throw new Error("unexpected GroupQueryAttention inputs");
  return concat([
    ...KEPT_INPUTS.map((i) => stringField(1, inputs[i]!)),
    stringField(1, TOKEN_ROWS),
    ...fs.filter((f) => f.number === 2 || f.number === 3 || f.number === 5).map((f) => f.raw),
    stringField(4, opType),
    stringField(7, ATTENTION_DOMAIN),
  ]);
}

export interface NodeSummary {
  opType: string;
  domain: string;
  inputs: string[];
  outputs: string[];
}

/** The graph's nodes and the model's operator set imports (domain → version), as stored. */
export function describeModel(model: Uint8Array): { nodes: NodeSummary[]; opsets: Map<string, number> } {
  const nodes: NodeSummary[] = [];
  const opsets = new Map<string, number>();
  for (const f of fields(model)) {
    if (f.number === 8 && f.payload) {
      const set = fields(f.payload);
      const version = set.find((x) => x.number === 2);
      opsets.set(text(set.find((x) => x.number === 1)?.payload), version ? readVarint(version.raw, 1)[0] : 0);
    }
    if (f.number !== 7 || !f.payload) continue;
    for (const g of fields(f.payload)) {
      if (g.number !== 1 || !g.payload) continue;
      const n = fields(g.payload);
      const strings = (k: number) => n.filter((x) => x.number === k).map((x) => text(x.payload));
      nodes.push({
        opType: strings(4)[0] ?? "",
        domain: strings(7)[0] ?? "",
        inputs: strings(1),
        outputs: strings(2),
      });
    }
  }
  return { nodes, opsets };
}

/**
 * A TensorShapeProto (dim 1 → dim_value 1) with its last dimension, the head size (always a fixed
 * value in converted graphs), replaced by `width(headSize)`.
 */
function resizeLastDim(shape: Uint8Array, width: (headSize: number) => number): Uint8Array {
  const parts = fields(shape);
  const last = parts.findLastIndex((d) => d.number === 1);
  const dim = last >= 0 ? fields(parts[last]!.payload!) : [];
  const value = dim.find((x) => x.number === 1 && x.wire === 0);
  if (!value) throw new Error("the KV cache's head size is not a fixed dimension");
  const widened = lengthDelimited(1, Uint8Array.from([0x08, ...varint(width(readVarint(value.raw, 1)[0]))]));
  return concat(parts.map((d, i) => (i === last ? widened : d.raw)));
}

/**
 * A float cache tensor's ValueInfoProto (name 1, type 2 → tensor_type 1 → elem_type 1, shape 2)
 * declared in the cache's element type.
 */
function asCacheType(valueInfo: Uint8Array, dtype: KvDtype): Uint8Array {
  const elemType = dtype === "int8" ? INT8 : FLOAT16;
  return concat(
    fields(valueInfo).map((v) => {
      if (v.number !== 2 || !v.payload) return v.raw;
      const type = fields(v.payload).map((t) => {
        if (t.number !== 1 || !t.payload) return t.raw;
        const tensor = fields(t.payload).map((e) => {
          if (e.number === 2 && e.payload && dtype === "int8")
            return lengthDelimited(
              2,
              resizeLastDim(e.payload, (headSize) => cacheRowElements(dtype, headSize)),
            );
          if (e.number !== 1 || e.wire !== 0) return e.raw;
          if (readVarint(e.raw, 1)[0] !== FLOAT) throw new Error("the KV cache tensors are not float");
          return Uint8Array.from([0x08, elemType]);
        });
        return lengthDelimited(1, concat(tensor));
      });
      return lengthDelimited(2, concat(type));
    }),
  );
}

/**
 * token_rows as a graph input (ValueInfoProto: name 1, type 2 → tensor_type 1 → elem_type 1,
 * shape 2 → dim 1 → dim_param 2).
 */
function tokenRowsInput(): Uint8Array {
  const shape = lengthDelimited(1, stringField(2, "token_count"));
  const tensorType = concat([Uint8Array.of(0x08, INT64), lengthDelimited(2, shape)]);
  const input = concat([stringField(1, TOKEN_ROWS), lengthDelimited(2, lengthDelimited(1, tensorType))]);
  return lengthDelimited(11, input);
}

const isCacheTensor = (name: string) => /^(past_key_values|present)\.\d+\.(key|value)$/.test(name);

/** The converter's activation blocks (ACTIVATION_BLOCKS_METADATA) from metadata_props 14 (key 1, value 2). */
export function activationBlocksOf(model: Uint8Array): Record<string, number> {
  for (const f of fields(model)) {
    if (f.number !== 14 || !f.payload) continue;
    const entry = fields(f.payload);
    if (text(entry.find((e) => e.number === 1)?.payload) !== ACTIVATION_BLOCKS_METADATA) continue;
    return JSON.parse(text(entry.find((e) => e.number === 2)?.payload)) as Record<string, number>;
  }
  return {};
}

/**
 * The ModelProto with every GroupQueryAttention node replaced, every projection epilogue fused and
 * the ortserve operator set imported, or undefined when the graph has neither (nothing to
 * replace). The cache inputs and outputs are declared in `cacheDtype`.
 */
export function withCachedAttention(
  model: Uint8Array,
  opts: AttentionGraphOptions = {},
): Uint8Array | undefined {
  const cacheDtype = opts.cacheDtype ?? "float32";
  const opType = OPS[cacheDtype];
  let replaced = 0;
  let fused = 0;
  const parts: Uint8Array[] = [];
  const activationBlocks = activationBlocksOf(model);
  for (const f of fields(model)) {
    if (f.number !== 7 || !f.payload) {
      parts.push(f.raw);
      continue;
    }
    // GraphProto: node 1, input 11, output 12.
    const graph = fields(f.payload).map((g) => {
      if (!g.payload) return g.raw;
      if (cacheDtype !== "float32" && (g.number === 11 || g.number === 12)) {
        const name = text(fields(g.payload).find((v) => v.number === 1)?.payload);
        return isCacheTensor(name) ? lengthDelimited(g.number, asCacheType(g.payload, cacheDtype)) : g.raw;
      }
      if (g.number !== 1) return g.raw;
      const node = rewriteNode(g.payload, opType);
      if (!node) return g.raw;
      replaced++;
      return lengthDelimited(1, node);
    });
    if (replaced > 0) graph.push(tokenRowsInput());
    const fusion = fuseEpilogues(concat(graph), ATTENTION_DOMAIN, {
      quantMatMul: opts.quantMatMul,
      activationBlocks,
    });
    fused += fusion.fused;
    parts.push(lengthDelimited(7, fusion.graph));
  }
  if (replaced === 0 && fused === 0) return undefined;
  // OperatorSetIdProto: domain 1, version 2.
  parts.push(lengthDelimited(8, concat([stringField(1, ATTENTION_DOMAIN), Uint8Array.from([0x10, 1])])));
  return concat(parts);
}

/**
 * The path of `modelPath`'s graph with the cached-attention kernel: a sibling file (ONNX Runtime
 * only reads external data from the graph's own directory), rewritten when the original changes.
 * Undefined when the graph has no GroupQueryAttention node, or the directory cannot be written.
 */
export function cachedAttentionModel(
  modelPath: string,
  opts: AttentionGraphOptions = {},
): string | undefined {
  const rewritten = withCachedAttention(readFileSync(modelPath), opts);
  if (!rewritten) return undefined;
  const cacheSuffix = { float32: "", float16: "-f16", int8: "-i8" }[opts.cacheDtype ?? "float32"];
  const suffix = `cached-attention${cacheSuffix}${opts.quantMatMul ? "-bq" : ""}`;
  const target = join(dirname(modelPath), `.${basename(modelPath, ".onnx")}.${suffix}.onnx`);
  try {
    if (existsSync(target) && Buffer.from(rewritten).equals(readFileSync(target))) return target;
    // Engines in several worker threads of one process may write it at once.
    const staging = `${target}.${process.pid}.${threadId}.${randomBytes(4).toString("hex")}.tmp`;
    writeFileSync(staging, rewritten);
    renameSync(staging, target);
    return target;
  } catch (err) {
    process.emitWarning(
      `ortserve: cannot write ${target} (${(err as Error).message}); using ONNX Runtime's attention`,
    );
    return undefined;
  }
}
