/**
 * Just enough of the protobuf wire format to rewrite an ONNX model's graph in place: fields are
 * read with their raw encoding, so whatever a rewrite does not touch (weights, metadata) is
 * copied through byte for byte.
 */

export interface Field {
  number: number;
  wire: number;
  /** The field's whole encoding (key included), to copy unchanged. */
  raw: Uint8Array;
  /** Payload of a length-delimited field. */
  payload?: Uint8Array;
}

export function readVarint(buf: Uint8Array, at: number): [number, number] {
  let value = 0;
  let scale = 1;
  for (;;) {
    if (at >= buf.length) throw new Error("truncated varint");
    const byte = buf[at++]!;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, at];
    scale *= 128;
  }
}

export function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let at = 0;
  while (at < buf.length) {
    const start = at;
    const [key, next] = readVarint(buf, at);
    at = next;
    const wire = key & 7;
    let payload: Uint8Array | undefined;
    if (wire === 0) [, at] = readVarint(buf, at);
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const [len, body] = readVarint(buf, at);
      payload = buf.subarray(body, body + len);
      at = body + len;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
    if (at > buf.length) throw new Error("truncated field");
    out.push({ number: Math.floor(key / 8), wire, raw: buf.subarray(start, at), payload });
  }
  return out;
}

export function varint(value: number): number[] {
  const bytes: number[] = [];
  while (value >= 0x80) {
    bytes.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  bytes.push(value);
  return bytes;
}

export function lengthDelimited(number: number, payload: Uint8Array): Uint8Array {
  return concat([Uint8Array.from([...varint(number * 8 + 2), ...varint(payload.length)]), payload]);
}

export function stringField(number: number, text: string): Uint8Array {
  return lengthDelimited(number, new TextEncoder().encode(text));
}

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes ?? new Uint8Array());
