/**
 * A minimal protobuf encoder for the parts of onnx.proto (IR version 10) that the converter writes.
 * Weights never pass through here: they go to the external data file, and the model proto stays
 * small (well under protobuf's 2 GB message limit).
 */

/** ONNX TensorProto.DataType values used by the converter. */
export const OnnxDataType = {
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  INT32: 6,
  INT64: 7,
  FLOAT16: 10,
  DOUBLE: 11,
  BFLOAT16: 16,
} as const;
export type OnnxDataTypeId = (typeof OnnxDataType)[keyof typeof OnnxDataType];

export type AttributeValue = number | string | number[] | { float: number } | { floats: number[] };

export interface NodeProto {
  opType: string;
  domain?: string;
  name: string;
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, AttributeValue>;
}

export interface TensorProto {
  name: string;
  dataType: OnnxDataTypeId;
  dims: number[];
  /** Inline bytes for small tensors. */
  raw?: Uint8Array;
  /** Location of the bytes in the external data file. */
  external?: { location: string; offset: number; length: number };
}

/** A graph input or output. A string dim is symbolic (dim_param). */
export interface ValueInfoProto {
  name: string;
  elemType: OnnxDataTypeId;
  shape: (number | string)[];
}

export interface ModelProto {
  irVersion: number;
  opsets: { domain: string; version: number }[];
  producerName: string;
  producerVersion: string;
  graph: {
    name: string;
    nodes: NodeProto[];
    initializers: TensorProto[];
    inputs: ValueInfoProto[];
    outputs: ValueInfoProto[];
  };
  metadata?: Record<string, string>;
}

const WIRE_VARINT = 0;
const WIRE_LEN = 2;
const WIRE_FIXED32 = 5;

/** Growable byte sink with the protobuf primitives. */
class Writer {
  private buf = new Uint8Array(1024);
  private len = 0;

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  /** Varint of a non-negative or negative integer (negatives as 10-byte two's complement, like int64). */
  varint(value: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(value));
    this.reserve(10);
    while (v >= 0x80n) {
      this.buf[this.len++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.len++] = Number(v);
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  bytes(field: number, data: Uint8Array): void {
    this.tag(field, WIRE_LEN);
    this.varint(data.length);
    this.reserve(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
  }

  string(field: number, s: string): void {
    this.bytes(field, new TextEncoder().encode(s));
  }

  int(field: number, value: number | bigint): void {
    this.tag(field, WIRE_VARINT);
    this.varint(value);
  }

  float(field: number, value: number): void {
    this.tag(field, WIRE_FIXED32);
    this.reserve(4);
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 4).setFloat32(0, value, true);
    this.len += 4;
  }

  message(field: number, encode: (w: Writer) => void): void {
    const inner = new Writer();
    encode(inner);
    this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

const ATTR_FLOAT = 1;
const ATTR_INT = 2;
const ATTR_STRING = 3;
const ATTR_FLOATS = 6;
const ATTR_INTS = 7;

function encodeAttribute(w: Writer, name: string, value: AttributeValue): void {
  w.string(1, name);
  if (typeof value === "string") {
    w.string(4, value);
    w.int(20, ATTR_STRING);
  } else if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new Error(`attribute ${name}: use { float } for non-integers`);
    w.int(3, value);
    w.int(20, ATTR_INT);
  } else if (Array.isArray(value)) {
    for (const v of value) w.int(8, v);
    w.int(20, ATTR_INTS);
  } else if ("float" in value) {
    w.float(2, value.float);
    w.int(20, ATTR_FLOAT);
  } else {
    for (const v of value.floats) w.float(7, v);
    w.int(20, ATTR_FLOATS);
  }
}

function encodeNode(w: Writer, node: NodeProto): void {
  for (const i of node.inputs) w.string(1, i);
  for (const o of node.outputs) w.string(2, o);
  w.string(3, node.name);
  w.string(4, node.opType);
  for (const [k, v] of Object.entries(node.attributes ?? {})) w.message(5, (a) => encodeAttribute(a, k, v));
  if (node.domain) w.string(7, node.domain);
}

function encodeTensor(w: Writer, t: TensorProto): void {
  for (const d of t.dims) w.int(1, d);
  w.int(2, t.dataType);
  w.string(8, t.name);
  if (t.raw) w.bytes(9, t.raw);
  if (t.external) {
    const entries: [string, string][] = [
      ["location", t.external.location],
      ["offset", String(t.external.offset)],
      ["length", String(t.external.length)],
    ];
    for (const [k, v] of entries)
      w.message(13, (e) => {
        e.string(1, k);
        e.string(2, v);
      });
    w.int(14, 1); // data_location = EXTERNAL
  }
}

function encodeValueInfo(w: Writer, v: ValueInfoProto): void {
  w.string(1, v.name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.int(1, v.elemType);
      tensor.message(2, (shape) => {
        for (const d of v.shape)
          shape.message(1, (dim) => (typeof d === "number" ? dim.int(1, d) : dim.string(2, d)));
      });
    }),
  );
}

export function encodeModel(model: ModelProto): Uint8Array {
  const w = new Writer();
  w.int(1, model.irVersion);
  w.string(2, model.producerName);
  w.string(3, model.producerVersion);
  w.message(7, (g) => {
    for (const n of model.graph.nodes) g.message(1, (m) => encodeNode(m, n));
    g.string(2, model.graph.name);
    for (const t of model.graph.initializers) g.message(5, (m) => encodeTensor(m, t));
    for (const i of model.graph.inputs) g.message(11, (m) => encodeValueInfo(m, i));
    for (const o of model.graph.outputs) g.message(12, (m) => encodeValueInfo(m, o));
  });
  for (const op of model.opsets)
    w.message(8, (o) => {
      if (op.domain) o.string(1, op.domain);
      o.int(2, op.version);
    });
  for (const [k, v] of Object.entries(model.metadata ?? {}))
    w.message(14, (e) => {
      e.string(1, k);
      e.string(2, v);
    });
  return w.finish();
}
