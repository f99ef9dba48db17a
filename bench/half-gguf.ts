/**
 * A float16 or bfloat16 copy of a GGUF, for measuring the 16-bit projections (HalfMatMul,
 * BFloat16MatMul) on real weights where no such file can be fetched: every matrix dequantized and
 * rounded to the 16-bit type (float16 to nearest even; bfloat16 by truncation, as a float32
 * checkpoint's top half), vectors kept float32, metadata as the source's but the file type.
 * Tensors are made one at a time while written.
 *
 *   node bench/half-gguf.ts <source.gguf> <out.gguf> [--bf16]
 *
 * Then `ortserve convert <out.gguf> <model-dir>` and `bench/decode.ts --model-dir`/`--gguf` as
 * for any model; llama.cpp runs the same file.
 */
import { parseArgs } from "node:util";
import { float32ToFp16 } from "../src/models/gguf/half.ts";
import { encodeF32 } from "../src/models/gguf/quantize.ts";
import { writeRetypedGguf } from "../src/models/gguf/retyped-copy.ts";
import { GgmlType } from "../src/models/gguf/types.ts";

/** llama_ftype: LLAMA_FTYPE_MOSTLY_F16, LLAMA_FTYPE_MOSTLY_BF16. */
const FTYPE = { f16: 1, bf16: 32 } as const;

const { values, positionals } = parseArgs({
  options: { bf16: { type: "boolean", default: false } },
  allowPositionals: true,
});
const [source, out] = positionals;
if (!source || !out) {
  console.error("usage: node bench/half-gguf.ts <source.gguf> <out.gguf> [--bf16]");
  process.exit(2);
}
const format = values.bf16 ? "bf16" : "f16";

function encode(v: Float32Array): Uint8Array {
  const halves = new Uint16Array(v.length);
  const bits = new Uint32Array(v.buffer, v.byteOffset, v.length);
  for (let i = 0; i < v.length; i++) halves[i] = format === "bf16" ? bits[i]! >>> 16 : float32ToFp16(v[i]!);
  return new Uint8Array(halves.buffer);
}

writeRetypedGguf(source, out, FTYPE[format], (t, src) => {
  const matrix = t.dims.length === 2;
  const type = matrix ? (format === "bf16" ? GgmlType.BF16 : GgmlType.F16) : GgmlType.F32;
  // Made when written: one tensor in memory at a time.
  const data = {
    length: t.elementCount * (matrix ? 2 : 4),
    read: () => (matrix ? encode : encodeF32)(src.dequantize(t)),
  };
  return { name: t.name, dims: t.dims, type, data };
});
console.log(`${out}: ${format} matrices from ${source}`);
