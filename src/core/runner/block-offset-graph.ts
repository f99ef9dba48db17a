/**
 * Fuses the converter's per-block offset subgraph (weights such as Q4_1, see
 * models/convert/decoder-graph.ts) into one `ortserve.BlockOffsetAdd` node, which the native
 * session registers (native/src/block-offset.cc):
 *
 *   both = MatMulNBits(x)            [.., n + blocks]: the projection, then x's block sums
 *   y, sums = Split(both, [n, blocks], axis -1)
 *   out = Add(y, MatMul(sums, C))    C [blocks, n]: each block's offset
 *
 * becomes out = BlockOffsetAdd(both, C). The arithmetic is the same (the product over blocks,
 * then the add); what goes is two of the three nodes per projection, whose dispatch cost a
 * single-token decode step more than their work. Only that exact shape is fused: a tensor read
 * anywhere else keeps its nodes.
 */
import { concat, fields, lengthDelimited, stringField, text } from "./proto-fields.ts";

export const BLOCK_OFFSET_OP = "BlockOffsetAdd";

interface ParsedNode {
  opType: string;
  domain: string;
  name: string;
  inputs: string[];
  outputs: string[];
  /** AttributeProto payloads. */
  attributes: Uint8Array[];
}

// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
function parseNode(node: Uint8Array): ParsedNode {
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

/** AttributeProto `axis` (name 1) with i (3) = -1: int64 -1 is ten bytes on the wire. */
function splitsLastAxis(split: ParsedNode): boolean {
  const minusOne = [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
  return split.attributes.some((a) => {
    const fs = fields(a);
    if (text(fs.find((f) => f.number === 1)?.payload) !== "axis") return false;
    const i = fs.find((f) => f.number === 3);
    return i !== undefined && i.raw.length === minusOne.length && i.raw.every((b, k) => b === minusOne[k]);
  });
}

/**
 * The GraphProto with every offset subgraph fused, and how many were; the graph unchanged (and 0)
 * when it has none. Initializers only the removed nodes read (the Split sizes) go with them.
 */
export function fuseBlockOffsets(graph: Uint8Array, domain: string): { graph: Uint8Array; fused: number } {
  // GraphProto: node 1, initializer 5, output 12. TensorProto: name 8. ValueInfoProto: name 1.
  const gfs = fields(graph);
  const nodes = gfs.map((f) => (f.number === 1 && f.payload ? parseNode(f.payload) : undefined));
  const readers = new Map<string, number>();
  const producer = new Map<string, number>();
  nodes.forEach((n, i) => {
    if (!n) return;
    for (const input of n.inputs) readers.set(input, (readers.get(input) ?? 0) + 1);
    for (const output of n.outputs) producer.set(output, i);
  });
  for (const f of gfs)
    if (f.number === 12 && f.payload) {
      const name = text(fields(f.payload).find((v) => v.number === 1)?.payload);
      readers.set(name, (readers.get(name) ?? 0) + 1);
    }
  const readOnce = (name: string) => readers.get(name) === 1;

  const removed = new Set<number>();
  const replacement = new Map<number, Uint8Array>();
  const freed = new Set<string>();
  nodes.forEach((add, i) => {
    if (add?.opType !== "Add" || add.domain !== "" || add.inputs.length !== 2) return;
    for (const [y, corr] of [add.inputs, [...add.inputs].reverse()] as [string, string][]) {
      const mi = producer.get(corr);
      const mm = mi === undefined ? undefined : nodes[mi];
      if (mm?.opType !== "MatMul" || mm.domain !== "" || mm.inputs.length !== 2) continue;
      const si = producer.get(y);
      const split = si === undefined ? undefined : nodes[si];
      if (split?.opType !== "Split" || split.domain !== "" || split.outputs.length !== 2) continue;
      if (split.outputs[0] !== y || split.outputs[1] !== mm.inputs[0] || !splitsLastAxis(split)) continue;
      if (!readOnce(y) || !readOnce(corr) || !readOnce(split.outputs[1]!)) continue;
      removed.add(si!);
      removed.add(mi!);
      for (const input of split.inputs.slice(1)) freed.add(input);
      replacement.set(
        i,
        concat([
          stringField(1, split.inputs[0]!),
          stringField(1, mm.inputs[1]!),
          ...add.outputs.map((o) => stringField(2, o)),
          stringField(3, add.name),
          stringField(4, BLOCK_OFFSET_OP),
          stringField(7, domain),
        ]),
      );
      return;
    }
  });
  if (replacement.size === 0) return { graph, fused: 0 };

  // A freed initializer stays if a node that remains still reads it.
  for (const [i, n] of nodes.entries())
    if (n && !removed.has(i) && !replacement.has(i)) for (const input of n.inputs) freed.delete(input);
  const parts = gfs.map((f, i) => {
    if (removed.has(i)) return new Uint8Array();
    const node = replacement.get(i);
    if (node) return lengthDelimited(1, node);
    if (
      f.number === 5 &&
      f.payload &&
      freed.has(text(fields(f.payload).find((t) => t.number === 8)?.payload))
    )
      return new Uint8Array();
    return f.raw;
  });
  return { graph: concat(parts), fused: replacement.size };
}
