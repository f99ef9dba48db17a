/**
 * An F32 copy of the reference GGUF: every tensor dequantized, metadata unchanged. llama.cpp on it
 * computes the same function the quantized file defines, but with float32 activations instead of
 * its Q8 activation quantization, so it is a near-exact second opinion on the converted fp32 model.
 */
import { existsSync, mkdirSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { encodeF32 } from "../../src/models/gguf/quantize.ts";
import { writeRetypedGguf } from "../../src/models/gguf/retyped-copy.ts";
import { GgmlType } from "../../src/models/gguf/types.ts";
import { cacheDir } from "../../src/util/paths.ts";

/** llama_ftype LLAMA_FTYPE_ALL_F32. */
const FTYPE_ALL_F32 = 0;

/** Path of the F32 copy of `source`, written (about 4 bytes per weight) when missing or stale. */
export function ensureExactGguf(source: string, outDir = join(cacheDir(), "fidelity")): string {
  const out = join(outDir, `${basename(source).replace(/\.gguf$/i, "")}.f32.gguf`);
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(source).mtimeMs) return out;
  mkdirSync(outDir, { recursive: true });
  writeRetypedGguf(source, out, FTYPE_ALL_F32, (t, src) => ({
    name: t.name,
    dims: t.dims,
    type: GgmlType.F32,
    data: encodeF32(src.dequantize(t)),
  }));
  return out;
}
