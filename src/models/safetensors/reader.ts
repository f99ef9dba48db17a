/**
 * The safetensors format (what Hugging Face training runs save): an 8-byte little-endian header
 * length, a JSON header naming each tensor's dtype, shape and byte range, then the raw data. A
 * checkpoint may be split over several files (`model-00001-of-00002.safetensors`); `openSafetensors`
 * reads every `.safetensors` file of a directory as one set. Tensors are read on demand as float32.
 */
import { closeSync, openSync, readdirSync, readSync } from "node:fs";
import { join } from "node:path";
import { FP16_TO_F32 } from "../gguf/half.ts";

export interface SafetensorInfo {
  name: string;
  dtype: string;
  shape: number[];
  file: string;
  /** Absolute byte range in `file`. */
  begin: number;
  end: number;
}

export interface SafetensorsSet {
  tensor(name: string): SafetensorInfo | undefined;
  names(): string[];
  /** The tensor's values as float32 (F32, F16 and BF16 are read). */
  floats(info: SafetensorInfo): Float32Array;
  close(): void;
}

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

function readExactly(fd: number, length: number, position: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buf, done, length - done, position + done);
    if (n === 0) throw new Error(`unexpected end of file at byte ${position + done}`);
    done += n;
  }
  return buf;
}

/** The header of one file: its tensors with absolute byte ranges. */
function readHeader(path: string, fd: number): SafetensorInfo[] {
  const size = readExactly(fd, 8, 0).readBigUInt64LE(0);
  if (size > 100_000_000n) throw new Error(`${path}: implausible safetensors header of ${size} bytes`);
  const headerLength = Number(size);
  const header = JSON.parse(readExactly(fd, headerLength, 8).toString("utf8")) as Record<string, unknown>;
  const dataStart = 8 + headerLength;
  return Object.entries(header)
    .filter(([name]) => name !== "__metadata__")
    .map(([name, v]) => {
      const t = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const offsets = t.data_offsets as number[] | undefined;
      if (
        typeof t.dtype !== "string" ||
        !Array.isArray(t.shape) ||
        !Array.isArray(offsets) ||
        offsets.length !== 2
      )
        throw new Error(`${path}: tensor ${name} has a malformed header entry`);
      const info = {
        name,
        dtype: t.dtype,
        shape: t.shape as number[],
        file: path,
        begin: dataStart + offsets[0]!,
        end: dataStart + offsets[1]!,
      };
      const count = info.shape.reduce((a, b) => a * b, 1);
      const width = BYTES[info.dtype];
      if (width !== undefined && count * width !== info.end - info.begin)
        throw new Error(
          `${path}: tensor ${name} holds ${info.end - info.begin} bytes, expected ${count * width}`,
        );
      return info;
    });
}

export function openSafetensors(dir: string): SafetensorsSet {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".safetensors"))
    .sort()
    .map((f) => join(dir, f));
  if (files.length === 0) throw new Error(`${dir}: no .safetensors files`);
  const fds = new Map<string, number>();
  const tensors = new Map<string, SafetensorInfo>();
  try {
    for (const file of files) {
      const fd = openSync(file, "r");
      fds.set(file, fd);
      for (const info of readHeader(file, fd)) {
        if (tensors.has(info.name)) throw new Error(`${dir}: tensor ${info.name} appears in two files`);
        tensors.set(info.name, info);
      }
    }
  } catch (err) {
    for (const fd of fds.values()) closeSync(fd);
    throw err;
  }
  return {
    tensor: (name) => tensors.get(name),
    names: () => [...tensors.keys()],
    floats(info) {
      const raw = readExactly(fds.get(info.file)!, info.end - info.begin, info.begin);
      const count = raw.length / (BYTES[info.dtype] ?? Number.NaN);
      const out = new Float32Array(count);
      switch (info.dtype) {
        case "F32":
          for (let i = 0; i < count; i++) out[i] = raw.readFloatLE(i * 4);
          break;
        case "F16":
          for (let i = 0; i < count; i++) out[i] = FP16_TO_F32[raw.readUInt16LE(i * 2)]!;
          break;
        case "BF16": {
          // bfloat16 is the upper half of a float32.
          const bits = new Uint32Array(out.buffer);
          for (let i = 0; i < count; i++) bits[i] = raw.readUInt16LE(i * 2) << 16;
          break;
        }
        default:
          throw new Error(`tensor ${info.name}: dtype ${info.dtype} is not supported (F32, F16, BF16 are)`);
      }
      return out;
    },
    close() {
      for (const fd of fds.values()) closeSync(fd);
      fds.clear();
    },
  };
}
