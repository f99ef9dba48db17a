/**
 * A cheap structural check of an ONNX file, run when a server starts so a half-written model is
 * reported and skipped instead of failing its first request: every protobuf field of the
 * ModelProto must lie inside the file (a truncated file ends mid-field), it must hold a graph, and
 * each external data file its initializers point at must exist and be long enough for them.
 * Nothing here loads weights; a file that passes may still be refused by ONNX Runtime later.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, normalize } from "node:path";

/** Files above this are walked at the top level only (their graph is not read into memory). */
const FULL_READ_LIMIT = 256 << 20;

/** Protobuf field numbers of onnx.proto used here. */
const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;
const TENSOR_EXTERNAL_DATA = 13;
const ENTRY_KEY = 1;
const ENTRY_VALUE = 2;

interface Field {
  number: number;
  /** Byte range of a length-delimited field's payload. */
  start: number;
  end: number;
}

/** Reads bytes at a position (the whole file in memory, or positional reads). */
type ReadAt = (pos: number, len: number) => Uint8Array;

function varint(read: ReadAt, pos: number, limit: number): { value: number; next: number } {
  const bytes = read(pos, Math.min(10, limit - pos));
  let value = 0;
  for (let i = 0; i < bytes.length; i++) {
    value += (bytes[i]! & 0x7f) * 2 ** (7 * i);
    if ((bytes[i]! & 0x80) === 0) return { value, next: pos + i + 1 };
  }
  throw new Error(`cut off inside a field at byte ${pos}`);
}

/** The length-delimited fields in [start, end); throws when any field runs past `end`. */
function lengthFields(read: ReadAt, start: number, end: number): Field[] {
  const out: Field[] = [];
  let pos = start;
  while (pos < end) {
    const tag = varint(read, pos, end);
    const number = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    pos = tag.next;
    if (wire === 0) pos = varint(read, pos, end).next;
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const len = varint(read, pos, end);
      out.push({ number, start: len.next, end: len.next + len.value });
      pos = len.next + len.value;
    } else throw new Error(`unexpected protobuf wire type ${wire} at byte ${pos}`);
    if (pos > end)
      throw new Error(`a field runs past the end of its message (byte ${pos} of ${end}): truncated`);
  }
  return out;
}

const text = (read: ReadAt, f: Field) => Buffer.from(read(f.start, f.end - f.start)).toString("utf8");

/** The bytes each external data file must have: the end of the furthest tensor stored in it. */
function externalDataNeeds(read: ReadAt, graph: Field): Map<string, number> {
  const needs = new Map<string, number>();
  for (const init of lengthFields(read, graph.start, graph.end)) {
    if (init.number !== GRAPH_INITIALIZER) continue;
    const entries: Record<string, string> = {};
    for (const entry of lengthFields(read, init.start, init.end)) {
      if (entry.number !== TENSOR_EXTERNAL_DATA) continue;
      const kv = lengthFields(read, entry.start, entry.end);
      const key = kv.find((f) => f.number === ENTRY_KEY);
      const value = kv.find((f) => f.number === ENTRY_VALUE);
      if (key && value) entries[text(read, key)] = text(read, value);
    }
    if (entries.location === undefined) continue;
    const end = Number(entries.offset ?? 0) + Number(entries.length ?? 0);
    needs.set(entries.location, Math.max(needs.get(entries.location) ?? 0, end));
  }
  return needs;
}

/** What is wrong with the ONNX file at `path`, or undefined when its structure holds together. */
export function onnxFileProblem(path: string): string | undefined {
  let fd: number | undefined;
  try {
    const size = statSync(path).size;
    if (size === 0) return `${path} is empty`;
    fd = openSync(path, "r");
    const handle = fd;
    let read: ReadAt;
    if (size <= FULL_READ_LIMIT) {
      const all = Buffer.alloc(size);
      readSync(handle, all, 0, size, 0);
      read = (pos, len) => all.subarray(pos, pos + len);
    } else
      read = (pos, len) => {
        const b = Buffer.alloc(len);
        return b.subarray(0, readSync(handle, b, 0, len, pos));
      };
    const graph = lengthFields(read, 0, size).find((f) => f.number === MODEL_GRAPH);
    if (!graph) return `${path} holds no graph`;
    if (size > FULL_READ_LIMIT) return undefined;
    for (const [location, need] of externalDataNeeds(read, graph)) {
      if (isAbsolute(location) || normalize(location).startsWith(".."))
        return `${path} points at external data outside its directory (${location})`;
      const dataPath = join(dirname(path), location);
      let have: number;
      try {
        have = statSync(dataPath).size;
      } catch {
        return `${path} needs ${dataPath}, which is missing`;
      }
      if (have < need) return `${dataPath} has ${have} bytes, its tensors need ${need}: truncated`;
    }
    return undefined;
  } catch (err) {
    return `${path}: ${(err as Error).message}`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
