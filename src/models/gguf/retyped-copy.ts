/**
 * A copy of a GGUF with its tensors stored in other types (an F32 copy for the fidelity suite's
 * exact model, F16 or BF16 copies for the 16-bit benches): metadata as the source's but
 * general.file_type, tensors as `retype` makes them, in the source's order.
 */
import { type GgufFile, openGguf } from "./reader.ts";
import type { GgufTensorInfo } from "./types.ts";
import { type GgufTensorInput, writeGguf } from "./writer.ts";

/** Writes `out` from `source` with llama_ftype `fileType` and each tensor as `retype` gives it. */
export function writeRetypedGguf(
  source: string,
  out: string,
  fileType: number,
  retype: (tensor: GgufTensorInfo, file: GgufFile) => GgufTensorInput,
): void {
  const src = openGguf(source);
  try {
    writeGguf(out, {
      version: src.version as 2 | 3,
      alignment: src.alignment,
      metadata: src.metadataEntries.map((e) =>
        e.key === "general.file_type" ? { ...e, value: fileType } : e,
      ),
      tensors: src.tensors.map((t) => retype(t, src)),
    });
  } finally {
    src.close();
  }
}
