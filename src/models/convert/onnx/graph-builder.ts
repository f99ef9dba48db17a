/**
 * Builds an ONNX graph node by node. Large initializers are appended to an external data file as
 * they are produced (never held together in memory); small ones are stored inline.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { basename } from "node:path";
import {
  type AttributeValue,
  encodeModel,
  type NodeProto,
  OnnxDataType,
  type OnnxDataTypeId,
  type TensorProto,
  type ValueInfoProto,
} from "./proto.ts";

/** Tensors at least this large go to the external file. */
const EXTERNAL_THRESHOLD_BYTES = 1024;
/** Page-aligned offsets let ONNX Runtime map external data instead of copying it. */
const EXTERNAL_ALIGNMENT = 4096;

export class ExternalDataFile {
  readonly location: string;
  private readonly fd: number;
  private offset = 0;

  /** `location` is the name the model refers to (the file may be renamed to it once complete). */
  constructor(path: string, location = basename(path)) {
    this.location = location;
    this.fd = openSync(path, "w");
  }

  append(data: Uint8Array): { location: string; offset: number; length: number } {
    const pad = (EXTERNAL_ALIGNMENT - (this.offset % EXTERNAL_ALIGNMENT)) % EXTERNAL_ALIGNMENT;
    if (pad) writeSync(this.fd, new Uint8Array(pad), 0, pad, this.offset);
    const offset = this.offset + pad;
    writeSync(this.fd, data, 0, data.length, offset);
    this.offset = offset + data.length;
    return { location: this.location, offset, length: data.length };
  }

  close(): void {
    closeSync(this.fd);
  }
}

function bytesOf(data: Float32Array | BigInt64Array | Int32Array | Uint8Array | Uint16Array): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

export class GraphBuilder {
  readonly nodes: NodeProto[] = [];
  readonly initializers: TensorProto[] = [];
  readonly inputs: ValueInfoProto[] = [];
  readonly outputs: ValueInfoProto[] = [];
  /** The model's metadata_props (key-value strings ONNX Runtime keeps but does not read). */
  readonly metadata: Record<string, string> = {};
  private readonly names = new Map<string, number>();
  private readonly constants = new Map<string, string>();

  private readonly external: ExternalDataFile;

  constructor(external: ExternalDataFile) {
    this.external = external;
  }

  /** A fresh value name with the given prefix. */
  fresh(prefix: string): string {
    const n = this.names.get(prefix) ?? 0;
    this.names.set(prefix, n + 1);
    return n === 0 ? prefix : `${prefix}_${n}`;
  }

  input(name: string, elemType: OnnxDataTypeId, shape: (number | string)[]): string {
    this.inputs.push({ name, elemType, shape });
    return name;
  }

  output(name: string, elemType: OnnxDataTypeId, shape: (number | string)[]): void {
    this.outputs.push({ name, elemType, shape });
  }

  /** Adds a node; returns its output names (fresh ones derived from `out` when not given exactly). */
  node(
    opType: string,
    inputs: string[],
    out: string | string[],
    attributes?: Record<string, AttributeValue>,
    domain?: string,
  ): string[] {
    const outputs = Array.isArray(out) ? out : [this.fresh(out)];
    this.nodes.push({ opType, domain, name: this.fresh(`${opType}_node`), inputs, outputs, attributes });
    return outputs;
  }

  /** Single-output shorthand for `node`. */
  op(
    opType: string,
    inputs: string[],
    out: string,
    attributes?: Record<string, AttributeValue>,
    domain?: string,
  ): string {
    return this.node(opType, inputs, out, attributes, domain)[0]!;
  }

  initializer(
    name: string,
    dataType: OnnxDataTypeId,
    dims: number[],
    data: Float32Array | BigInt64Array | Int32Array | Uint8Array | Uint16Array,
  ): string {
    const raw = bytesOf(data);
    const tensor: TensorProto = { name, dataType, dims };
    if (raw.byteLength >= EXTERNAL_THRESHOLD_BYTES) tensor.external = this.external.append(raw);
    else tensor.raw = raw.slice();
    this.initializers.push(tensor);
    return name;
  }

  /** A deduplicated int64 constant (shapes, axes, slice bounds). */
  int64s(values: number[]): string {
    const key = `i64:${values.join(",")}`;
    let name = this.constants.get(key);
    if (!name) {
      name = this.initializer(
        this.fresh("const_i64"),
        OnnxDataType.INT64,
        [values.length],
        BigInt64Array.from(values.map(BigInt)),
      );
      this.constants.set(key, name);
    }
    return name;
  }

  /** A deduplicated scalar constant. */
  scalar(value: number, dataType: typeof OnnxDataType.FLOAT | typeof OnnxDataType.INT64): string {
    const key = `s${dataType}:${value}`;
    let name = this.constants.get(key);
    if (!name) {
      const data = dataType === OnnxDataType.FLOAT ? Float32Array.of(value) : BigInt64Array.of(BigInt(value));
      name = this.initializer(this.fresh("const_scalar"), dataType, [], data);
      this.constants.set(key, name);
    }
    return name;
  }

  encode(opts: { producerVersion: string; metadata?: Record<string, string> }): Uint8Array {
    return encodeModel({
      irVersion: 10,
      opsets: [
        { domain: "", version: 21 },
        { domain: "com.microsoft", version: 1 },
      ],
      producerName: "ortserve",
      producerVersion: opts.producerVersion,
      graph: {
        name: "decoder",
        nodes: this.nodes,
        initializers: this.initializers,
        inputs: this.inputs,
        outputs: this.outputs,
      },
      metadata: { ...this.metadata, ...opts.metadata },
    });
  }
}
