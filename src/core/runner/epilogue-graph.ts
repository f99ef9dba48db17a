/**
 * Fuses what the converter emits after a projection's MatMulNBits (models/convert/decoder-graph.ts)
 * into the native session's epilogue operators (native/src/projection-epilogue.cc):
 *
 * - The per-block offset term (weights such as Q4_1):
 *     both = MatMulNBits(x)            [.., n + blocks]: the projection, then x's block sums
 *     y, sums = Split(both, [n, blocks], axis -1)
 *     out = Add(y, MatMul(sums, C))    C [blocks, n]: each block's offset
 *   becomes out = BlockOffsetAdd(both, C).
 * - The SwiGLU of the packed gate/up projection:
 *     gate, up = Split(gu, [f, f], axis -1); act = Mul(Mul(gate, Sigmoid(gate)), up)
 *   becomes act = SwiGlu(gu), or BlockOffsetSwiGlu(both, C) when gu is a BlockOffsetAdd's.
 *
 * The arithmetic is the same up to float rounding (the offset product over blocks, then the add;
 * the sigmoid from a vectorised exp); what goes is the nodes, whose dispatch cost a single-token
 * decode step more than their work. Only those exact shapes are fused: a tensor read anywhere
 * else keeps its nodes.
 */
import {
  concat,
  type Field,
  fields,
  lengthDelimited,
  readVarint,
  stringField,
  text,
  varint,
} from "./proto-fields.ts";

/**
 * The model metadata key under which the converter records, as JSON { initializer: block }, the
 * quant weights whose activations llama.cpp quantizes in blocks other than 32 (256: Q8_K, for the
 * K-quants); BlockQuantMatMul takes it as its activation_block attribute.
 */
export const ACTIVATION_BLOCKS_METADATA = "ortserve.activation_blocks";

export const BLOCK_OFFSET_OP = "BlockOffsetAdd";
export const SWIGLU_OP = "SwiGlu";
export const BLOCK_OFFSET_SWIGLU_OP = "BlockOffsetSwiGlu";
export const QUANT_MATMUL_OP = "BlockQuantMatMul";
export const QUANT_MATMUL_OFFSET_OP = "BlockQuantMatMulOffset";
export const QUANT_MATMUL_SWIGLU_OP = "BlockQuantMatMulSwiGlu";
export const QUANT_MATMUL_OFFSET_SWIGLU_OP = "BlockQuantMatMulOffsetSwiGlu";
export const GEGLU_OP = "GeGlu";
export const BLOCK_OFFSET_GEGLU_OP = "BlockOffsetGeGlu";
export const QUANT_MATMUL_GEGLU_OP = "BlockQuantMatMulGeGlu";
export const QUANT_MATMUL_OFFSET_GEGLU_OP = "BlockQuantMatMulOffsetGeGlu";
export const HALF_MATMUL_OP = "HalfMatMul";
export const BFLOAT16_MATMUL_OP = "BFloat16MatMul";

interface Node {
  opType: string;
  domain: string;
  name: string;
  inputs: string[];
  outputs: string[];
  /** AttributeProto payloads. */
  attributes: Uint8Array[];
}

// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
function parseNode(node: Uint8Array): Node {
  const fs = fields(node);
  const strings = (k: number) => fs.filter((f) => f.number === k).map((f) => text(f.payload));
  return {
    opType: strings(4)[0] ?? "",
    domain: strings(7)[0] ?? "",
    name: strings(3)[0] ?? "",
    inputs: strings(1),
    outputs: strings(2),
    attributes: fs.filter((f) => f.number === 5 && f.payload).map((f) => f.payload!),
  };
}

function encodeNode(n: Node): Uint8Array {
  return concat([
    ...n.inputs.map((i) => stringField(1, i)),
    ...n.outputs.map((o) => stringField(2, o)),
    stringField(3, n.name),
    stringField(4, n.opType),
    ...n.attributes.map((a) => lengthDelimited(5, a)),
    stringField(7, n.domain),
  ]);
}

/** The node's attribute `name` (its AttributeProto payload), as a list of zero or one. */
function attributeNamed(node: Node, name: string): Uint8Array[] {
  return node.attributes.filter((a) => text(fields(a).find((f) => f.number === 1)?.payload) === name);
}

/** AttributeProto `axis` (name 1) with i (3) = -1: int64 -1 is ten bytes on the wire. */
function splitsLastAxis(split: Node): boolean {
  const minusOne = [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
  return split.attributes.some((a) => {
    const fs = fields(a);
    if (text(fs.find((f) => f.number === 1)?.payload) !== "axis") return false;
    const i = fs.find((f) => f.number === 3);
    return i !== undefined && i.raw.length === minusOne.length && i.raw.every((b, k) => b === minusOne[k]);
  });
}

/** An int attribute (AttributeProto name 1, i 3, type 20 = INT). */
function intAttributeProto(name: string, value: number): Uint8Array {
  return concat([
    stringField(1, name),
    Uint8Array.from([0x18, ...varint(value)]),
    Uint8Array.from([0xa0, 0x01, 2]),
  ]);
}

/** A node's int attribute (AttributeProto name 1, i 3), when set and small and non-negative. */
function intAttribute(node: Node, name: string): number | undefined {
  for (const a of node.attributes) {
    const fs = fields(a);
    if (text(fs.find((f) => f.number === 1)?.payload) !== name) continue;
    const i = fs.find((f) => f.number === 3);
    return i ? readVarint(i.raw, 1)[0] : undefined;
  }
  return undefined;
}

/** A TensorProto's int64 values (int64_data 7, packed, or raw_data 9), small non-negative ones only. */
function int64Values(tensor: Uint8Array): number[] | undefined {
  const fs = fields(tensor);
  const raw = fs.find((f) => f.number === 9)?.payload;
  if (raw) {
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    return Array.from({ length: raw.byteLength / 8 }, (_, i) => Number(view.getBigInt64(i * 8, true)));
  }
  const packed = fs.find((f) => f.number === 7 && f.payload)?.payload;
  if (!packed) return undefined;
  const values: number[] = [];
  for (let at = 0; at < packed.length; ) {
    const [v, next] = readVarint(packed, at);
    values.push(v);
    at = next;
  }
  return values;
}

/** The graph's nodes by position, who produces and who reads each tensor, and the edits to make. */
class GraphEdit {
  // GraphProto: node 1, initializer 5, output 12. TensorProto: name 8. ValueInfoProto: name 1.
  private readonly gfs: Field[];
  readonly nodes: (Node | undefined)[];
  private readonly producer = new Map<string, number>();
  private readonly readers = new Map<string, number>();
  private readonly removed = new Set<number>();
  private readonly replaced = new Map<number, Node>();
  /** Initializers a removed node read: dropped unless a remaining node reads them too. */
  private readonly freed = new Set<string>();

  constructor(graph: Uint8Array) {
    this.gfs = fields(graph);
    this.nodes = this.gfs.map((f) => (f.number === 1 && f.payload ? parseNode(f.payload) : undefined));
    this.nodes.forEach((n, i) => {
      if (!n) return;
      for (const input of n.inputs) this.readers.set(input, (this.readers.get(input) ?? 0) + 1);
      for (const output of n.outputs) this.producer.set(output, i);
    });
    for (const f of this.gfs)
      if (f.number === 12 && f.payload) {
        const name = text(fields(f.payload).find((v) => v.number === 1)?.payload);
        this.readers.set(name, (this.readers.get(name) ?? 0) + 1);
      }
  }

  get edits(): number {
    return this.replaced.size;
  }

  /** The node (and its index) producing `tensor`, as edited so far. */
  producerOf(tensor: string): [Node, number] | undefined {
    const i = this.producer.get(tensor);
    if (i === undefined || this.removed.has(i)) return undefined;
    const n = this.replaced.get(i) ?? this.nodes[i];
    return n ? [n, i] : undefined;
  }

  /** Node i as edited so far; undefined when removed. */
  current(i: number): Node | undefined {
    return this.removed.has(i) ? undefined : (this.replaced.get(i) ?? this.nodes[i]);
  }

  readCount(tensor: string): number {
    return this.readers.get(tensor) ?? 0;
  }

  initializerInt64s(name: string): number[] | undefined {
    for (const f of this.gfs)
      if (f.number === 5 && f.payload) {
        const tensor = fields(f.payload);
        if (text(tensor.find((t) => t.number === 8)?.payload) === name) return int64Values(f.payload);
      }
    return undefined;
  }

  /** An initializer's TensorProto data_type (2); undefined when no initializer has the name. */
  initializerType(name: string): number | undefined {
    for (const f of this.gfs)
      if (f.number === 5 && f.payload) {
        const tensor = fields(f.payload);
        if (text(tensor.find((t) => t.number === 8)?.payload) !== name) continue;
        const type = tensor.find((t) => t.number === 2);
        return type ? readVarint(type.raw, 1)[0] : undefined;
      }
    return undefined;
  }

  remove(i: number): void {
    const n = this.replaced.get(i) ?? this.nodes[i]!;
    this.removed.add(i);
    this.replaced.delete(i);
    for (const input of n.inputs) this.freed.add(input);
  }

  replace(i: number, node: Node): void {
    this.replaced.set(i, node);
    // The new node reads its own inputs; what only the old one read may go.
    for (const input of (this.nodes[i] ?? node).inputs) this.freed.add(input);
    for (const output of node.outputs) this.producer.set(output, i);
  }

  encode(): Uint8Array {
    const kept = new Set<string>();
    this.nodes.forEach((n, i) => {
      if (!n || this.removed.has(i)) return;
      for (const input of (this.replaced.get(i) ?? n).inputs) kept.add(input);
    });
    const parts = this.gfs.map((f, i) => {
      if (this.removed.has(i)) return new Uint8Array();
      const node = this.replaced.get(i);
      if (node) return lengthDelimited(1, encodeNode(node));
      if (f.number === 5 && f.payload) {
        const name = text(fields(f.payload).find((t) => t.number === 8)?.payload);
        if (this.freed.has(name) && !kept.has(name)) return new Uint8Array();
      }
      return f.raw;
    });
    return concat(parts);
  }
}

const isOp = (n: Node | undefined, op: string): n is Node => n?.opType === op && n.domain === "";

function fuseOffsets(g: GraphEdit, domain: string): number {
  let fused = 0;
  g.nodes.forEach((add, i) => {
    if (!isOp(add, "Add") || add.inputs.length !== 2) return;
    for (const [y, corr] of [add.inputs, [...add.inputs].reverse()] as [string, string][]) {
      const [mm, mi] = g.producerOf(corr) ?? [];
      const [split, si] = g.producerOf(y) ?? [];
      if (!isOp(mm, "MatMul") || mm.inputs.length !== 2 || !isOp(split, "Split")) continue;
      if (split.outputs.length !== 2 || split.outputs[0] !== y || split.outputs[1] !== mm.inputs[0]) continue;
      if (!splitsLastAxis(split) || g.readCount(y) !== 1 || g.readCount(corr) !== 1) continue;
      if (g.readCount(split.outputs[1]!) !== 1) continue;
      g.remove(si!);
      g.remove(mi!);
      g.replace(i, {
        ...add,
        opType: BLOCK_OFFSET_OP,
        domain,
        inputs: [split.inputs[0]!, mm.inputs[1]!],
        attributes: [],
      });
      fused++;
      return;
    }
  });
  return fused;
}

/**
 * Every act = Mul(activated, up), with gate and up the halves of a gate/up Split and `activation`
 * recognising activated as a function of gate alone (the nodes computing it, each read by nothing
 * else), becomes the gated activation `ops` names (replaceWithGlu).
 */
function fuseGatedActivation(
  g: GraphEdit,
  domain: string,
  ops: [string, string],
  activation: (activated: string, gate: string) => number[] | undefined,
): number {
  let fused = 0;
  g.nodes.forEach((act, i) => {
    if (!isOp(act, "Mul") || act.inputs.length !== 2) return;
    for (const [activated, up] of [act.inputs, [...act.inputs].reverse()] as [string, string][]) {
      const [split, si] = gateUpSplit(g, up) ?? [];
      if (!split || g.readCount(up) !== 1 || g.readCount(activated) !== 1) continue;
      const nodes = activation(activated, split.outputs[0]!);
      if (!nodes) continue;
      for (const n of [si!, ...nodes]) g.remove(n);
      replaceWithGlu(g, i, act, split, domain, ops);
      fused++;
      return;
    }
  });
  return fused;
}

/** silu(gate) = Mul(gate, Sigmoid(gate)): SwiGlu. */
function fuseSwiGlu(g: GraphEdit, domain: string): number {
  return fuseGatedActivation(g, domain, [SWIGLU_OP, BLOCK_OFFSET_SWIGLU_OP], (silu, gate) => {
    const [siluMul, mi] = g.producerOf(silu) ?? [];
    if (!isOp(siluMul, "Mul") || siluMul.inputs.length !== 2) return undefined;
    const sigmoidOut = siluMul.inputs.find((x) => x !== gate);
    if (!sigmoidOut || !siluMul.inputs.includes(gate)) return undefined;
    const [sigmoid, gi] = g.producerOf(sigmoidOut) ?? [];
    if (!isOp(sigmoid, "Sigmoid") || sigmoid.inputs[0] !== gate) return undefined;
    if (g.readCount(gate) !== 2 || g.readCount(sigmoidOut) !== 1) return undefined;
    return [mi!, gi!];
  });
}

/**
 * Node i (act) becomes the gated activation `ops` names of the projection `split` cut in two, or
 * its block-offset form after an offset term read by nothing else (both go into one operator).
 */
function replaceWithGlu(
  g: GraphEdit,
  i: number,
  act: Node,
  split: Node,
  domain: string,
  [plain, withOffset]: [string, string],
): void {
  const [offset, oi] = g.producerOf(split.inputs[0]!) ?? [];
  const absorb =
    offset?.opType === BLOCK_OFFSET_OP && offset.domain === domain && g.readCount(split.inputs[0]!) === 1;
  if (absorb) g.remove(oi!);
  const inputs = absorb ? offset.inputs : [split.inputs[0]!];
  g.replace(i, { ...act, opType: inputs.length === 2 ? withOffset : plain, domain, inputs, attributes: [] });
}

/** The gate/up Split whose halves are `gate` and `up`, splitting the last axis in equal parts. */
function gateUpSplit(g: GraphEdit, up: string): [Node, number] | undefined {
  const [split, si] = g.producerOf(up) ?? [];
  if (!isOp(split, "Split") || split.outputs.length !== 2 || split.outputs[1] !== up) return undefined;
  if (!splitsLastAxis(split) || split.inputs.length !== 2) return undefined;
  const sizes = g.initializerInt64s(split.inputs[1]!);
  if (sizes?.length !== 2 || sizes[0] !== sizes[1]) return undefined;
  return [split, si!];
}

/** The op types of the converter's GELU table subgraph (decoder-graph.ts tanhGeluFp16Table), by count. */
const GELU_TABLE_OPS: Record<string, number> = { Max: 1, Cast: 6, Mul: 6, Add: 2, Tanh: 1 };

/**
 * The converter's GeGLU, act = Mul(Where(Less(gate, 10), table(gate), gate), up) with gate and up
 * the halves of a gate/up Split and table(gate) its GELU table subgraph (nodes reading only gate
 * and constants, read by nothing else, of exactly GELU_TABLE_OPS), becomes GeGlu, the same
 * function (native/src/projection-epilogue.h; test/runner/epilogue-ops.test.ts holds them equal on
 * every binary16 input).
 */
function fuseGeGlu(g: GraphEdit, domain: string): number {
  return fuseGatedActivation(g, domain, [GEGLU_OP, BLOCK_OFFSET_GEGLU_OP], (activated, gate) => {
    const [where, wi] = g.producerOf(activated) ?? [];
    if (!isOp(where, "Where") || where.inputs.length !== 3) return undefined;
    const [condition, table, otherwise] = where.inputs as [string, string, string];
    if (otherwise !== gate) return undefined;
    const [less, li] = g.producerOf(condition) ?? [];
    if (!isOp(less, "Less") || less.inputs[0] !== gate || g.producerOf(less.inputs[1]!)) return undefined;
    const subgraph = tableSubgraph(g, table, gate);
    if (!subgraph || g.readCount(gate) !== 3) return undefined;
    if (g.readCount(condition) !== 1 || g.readCount(table) !== 1) return undefined;
    return [wi!, li!, ...subgraph];
  });
}

/**
 * The nodes computing `table` from `gate` and constants, when they are GELU_TABLE_OPS exactly and
 * what they produce is read among them alone (but `table`); else undefined.
 */
function tableSubgraph(g: GraphEdit, table: string, gate: string): number[] | undefined {
  const found = new Map<number, Node>();
  const pending = [table];
  while (pending.length > 0) {
    const tensor = pending.pop()!;
    if (tensor === gate) continue;
    const [node, ni] = g.producerOf(tensor) ?? [];
    if (!node) continue; // a constant (initializer)
    if (node.domain !== "" || found.has(ni!)) continue;
    found.set(ni!, node);
    if (found.size > 16) return undefined;
    pending.push(...node.inputs);
  }
  const counts: Record<string, number> = {};
  for (const n of found.values()) counts[n.opType] = (counts[n.opType] ?? 0) + 1;
  const ops = Object.keys(GELU_TABLE_OPS);
  if (Object.keys(counts).length !== ops.length || ops.some((op) => counts[op] !== GELU_TABLE_OPS[op]))
    return undefined;
  // Every value made inside is read inside only (the table by the Where).
  const readsInside = new Map<string, number>();
  for (const n of found.values())
    for (const input of n.inputs) readsInside.set(input, (readsInside.get(input) ?? 0) + 1);
  for (const n of found.values())
    for (const output of n.outputs)
      if (output !== table && g.readCount(output) !== (readsInside.get(output) ?? 0)) return undefined;
  if (!found.has(g.producerOf(table)?.[1] ?? -1)) return undefined;
  // Nothing else reaches in: only gate, the table's own values and constants.
  for (const n of found.values())
    for (const input of n.inputs) {
      const [producer, pi] = g.producerOf(input) ?? [];
      if (input !== gate && producer && !found.has(pi!)) return undefined;
    }
  return [...found.keys()];
}

/** The BlockQuantMatMul form that stands for a MatMulNBits followed by `epilogue`. */
const QUANT_MATMUL_WITH: Record<string, string> = {
  [BLOCK_OFFSET_OP]: QUANT_MATMUL_OFFSET_OP,
  [SWIGLU_OP]: QUANT_MATMUL_SWIGLU_OP,
  [BLOCK_OFFSET_SWIGLU_OP]: QUANT_MATMUL_OFFSET_SWIGLU_OP,
  [GEGLU_OP]: QUANT_MATMUL_GEGLU_OP,
  [BLOCK_OFFSET_GEGLU_OP]: QUANT_MATMUL_OFFSET_GEGLU_OP,
};

/**
 * MatMulNBits with block 32 (or 16: scales per 16 inputs), 4 or 8 bits and the default zero points
 * becomes BlockQuantMatMul, keeping its block_size, and with the epilogue node after it (read by
 * nothing else) one BlockQuantMatMul form: the offset term's block-sum rows are then skipped, and a
 * SwiGLU's gate and up never leave the kernel.
 */
function fuseQuantMatMul(g: GraphEdit, domain: string, activationBlocks: Record<string, number>): number {
  let fused = 0;
  const quantizable = (n: Node | undefined): n is Node =>
    n?.opType === "MatMulNBits" &&
    n.domain === "com.microsoft" &&
    n.inputs.length === 3 &&
    [16, 32].includes(intAttribute(n, "block_size") ?? 0) &&
    [4, 8].includes(intAttribute(n, "bits") ?? 0);
  // block_size, and the activation block where the converter recorded one for the weights.
  const attributes = (mm: Node) => {
    const activationBlock = activationBlocks[mm.inputs[1]!];
    return [
      ...attributeNamed(mm, "block_size"),
      ...(activationBlock ? [intAttributeProto("activation_block", activationBlock)] : []),
    ];
  };
  g.nodes.forEach((_, i) => {
    const epilogue = g.current(i);
    const opType = epilogue?.domain === domain ? QUANT_MATMUL_WITH[epilogue.opType] : undefined;
    if (!epilogue || !opType) return;
    const projection = epilogue.inputs[0]!;
    const [mm, mi] = g.producerOf(projection) ?? [];
    if (!quantizable(mm) || g.readCount(projection) !== 1) return;
    g.remove(mi!);
    g.replace(i, {
      ...epilogue,
      opType,
      inputs: [...mm.inputs, ...epilogue.inputs.slice(1)],
      attributes: attributes(mm),
    });
    fused++;
  });
  g.nodes.forEach((_, i) => {
    const mm = g.current(i);
    if (!quantizable(mm)) return;
    g.replace(i, { ...mm, opType: QUANT_MATMUL_OP, domain, attributes: attributes(mm) });
    fused++;
  });
  return fused;
}

/** ortserve's 16-bit projection for an initializer of TensorProto data_type 10 (FLOAT16) or 16 (BFLOAT16). */
const HALF_MATMUL_FOR: Record<number, string> = { 10: HALF_MATMUL_OP, 16: BFLOAT16_MATMUL_OP };

/**
 * MatMul(x, Cast(B, to float)) with B a float16 or bfloat16 initializer (the converter's 16-bit
 * weights, decoder-graph.ts) and the Cast read by nothing else becomes HalfMatMul(x, B) or
 * BFloat16MatMul(x, B): the weights stay in their 16 bits instead of being folded into float32.
 * B may also be the Transpose (perm 1, 0) of such an initializer, read by nothing else (a tied
 * head multiplies by the embedding table so): the operator then takes the table with trans_b 1.
 */
function fuseHalfMatMul(g: GraphEdit, domain: string): number {
  let fused = 0;
  g.nodes.forEach((_, i) => {
    const mm = g.current(i);
    if (!isOp(mm, "MatMul") || mm.inputs.length !== 2) return;
    const [cast, ci] = g.producerOf(mm.inputs[1]!) ?? [];
    if (!isOp(cast, "Cast") || cast.inputs.length !== 1 || g.readCount(mm.inputs[1]!) !== 1) return;
    if (intAttribute(cast, "to") !== 1) return;
    const [transpose, ti] = g.producerOf(cast.inputs[0]!) ?? [];
    const transposed =
      isOp(transpose, "Transpose") && transposesMatrix(transpose) && g.readCount(cast.inputs[0]!) === 1;
    const b = transposed ? transpose.inputs[0]! : cast.inputs[0]!;
    const opType = HALF_MATMUL_FOR[g.initializerType(b) ?? -1];
    if (!opType || g.producerOf(b)) return;
    g.remove(ci!);
    if (transposed) g.remove(ti!);
    const attributes = transposed ? [intAttributeProto("trans_b", 1)] : [];
    g.replace(i, { ...mm, opType, domain, inputs: [mm.inputs[0]!, b], attributes });
    fused++;
  });
  return fused;
}

/** A Transpose of one input with perm [1, 0] (AttributeProto ints 8, packed or not). */
function transposesMatrix(t: Node): boolean {
  if (t.inputs.length !== 1) return false;
  const [perm] = attributeNamed(t, "perm");
  if (!perm) return false;
  const values: number[] = [];
  for (const f of fields(perm).filter((f) => f.number === 8)) {
    if (f.payload)
      for (let at = 0; at < f.payload.length; ) {
        const [v, next] = readVarint(f.payload, at);
        values.push(v);
        at = next;
      }
    else values.push(readVarint(f.raw, 1)[0]);
  }
  return values.length === 2 && values[0] === 1 && values[1] === 0;
}

/**
 * The GraphProto with every offset subgraph and SwiGLU fused, and how many nodes were made; the
 * graph unchanged (and 0) when it has neither. Initializers only removed nodes read (the Split
 * sizes) go with them.
 */
export function fuseEpilogues(
  graph: Uint8Array,
  domain: string,
  opts: { quantMatMul?: boolean; activationBlocks?: Record<string, number> } = {},
): { graph: Uint8Array; fused: number } {
  const g = new GraphEdit(graph);
  fuseOffsets(g, domain);
  fuseSwiGlu(g, domain);
  fuseGeGlu(g, domain);
  if (opts.quantMatMul) {
    fuseQuantMatMul(g, domain, opts.activationBlocks ?? {});
    fuseHalfMatMul(g, domain);
  }
  if (g.edits === 0) return { graph, fused: 0 };
  return { graph: g.encode(), fused: g.edits };
}
