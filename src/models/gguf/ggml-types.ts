/**
 * Sizes of every ggml tensor type id (ggml.c `type_traits`), so a reader can compute a tensor's
 * byte length and refuse the types this engine cannot dequantize with a message naming them.
 */
import type { GgmlTypeId } from "./types.ts";

export interface GgmlTypeInfo {
  id: number;
  name: string;
  /** Elements per block (1 for plain types). 0 for ids removed from ggml. */
  blockSize: number;
  /** Bytes per block. */
  typeSize: number;
  /** Whether `dequantize` handles this type. */
  supported: boolean;
}

function t(id: number, name: string, blockSize: number, typeSize: number, supported: boolean): GgmlTypeInfo {
  return { id, name, blockSize, typeSize, supported };
}

const QK_K = 256;

/** Every id ggml has assigned, including ones since removed (their files can no longer be loaded). */
export const GGML_TYPES: readonly GgmlTypeInfo[] = [
  t(0, "F32", 1, 4, true),
  t(1, "F16", 1, 2, true),
  t(2, "Q4_0", 32, 2 + 16, true),
  t(3, "Q4_1", 32, 2 + 2 + 16, true),
  t(4, "Q4_2", 0, 0, false),
  t(5, "Q4_3", 0, 0, false),
  t(6, "Q5_0", 32, 2 + 4 + 16, true),
  t(7, "Q5_1", 32, 2 + 2 + 4 + 16, true),
  t(8, "Q8_0", 32, 2 + 32, true),
  // Only an intermediate format of llama.cpp's dot products; it has no reference dequantizer.
  t(9, "Q8_1", 32, 2 + 2 + 32, false),
  t(10, "Q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2, true),
  t(11, "Q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, true),
  t(12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2, true),
  t(13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true),
  t(14, "Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, true),
  t(15, "Q8_K", QK_K, 4 + QK_K + (QK_K / 16) * 2, true),
  t(16, "IQ2_XXS", QK_K, 2 + QK_K / 4, false),
  t(17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false),
  t(18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false),
  t(19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false),
  t(20, "IQ4_NL", 32, 2 + 16, false),
  t(21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false),
  t(22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false),
  t(23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, false),
  t(24, "I8", 1, 1, true),
  t(25, "I16", 1, 2, true),
  t(26, "I32", 1, 4, true),
  t(27, "I64", 1, 8, true),
  t(28, "F64", 1, 8, true),
  t(29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false),
  t(30, "BF16", 1, 2, true),
  t(31, "Q4_0_4_4", 0, 0, false),
  t(32, "Q4_0_4_8", 0, 0, false),
  t(33, "Q4_0_8_8", 0, 0, false),
  t(34, "TQ1_0", QK_K, 2 + 4 * 13, false),
  t(35, "TQ2_0", QK_K, 2 + 64, false),
  t(36, "IQ4_NL_4_4", 0, 0, false),
  t(37, "IQ4_NL_4_8", 0, 0, false),
  t(38, "IQ4_NL_8_8", 0, 0, false),
  t(39, "MXFP4", 32, 1 + 16, false),
  t(40, "NVFP4", 64, 4 + 32, false),
  t(41, "Q1_0", 128, 2 + 16, false),
];

const byId = new Map<number, GgmlTypeInfo>(GGML_TYPES.map((info) => [info.id, info]));

/** The ggml name of a type id ("Q4_K"), or `type <id>` when ggml never assigned it. */
export function ggmlTypeName(id: number): string {
  return byId.get(id)?.name ?? `type ${id}`;
}

/** Table entry for an id, or undefined; does not check that the type is supported. */
export function lookupGgmlType(id: number): GgmlTypeInfo | undefined {
  return byId.get(id);
}

/**
 * Sizes of a type this engine can dequantize. Throws for unknown, removed and unsupported ids;
 * `tensorName` makes the message point at the offending tensor.
 */
export function ggmlTypeInfo(id: number, tensorName?: string): GgmlTypeInfo & { id: GgmlTypeId } {
  const where = tensorName === undefined ? "" : ` in tensor ${tensorName}`;
  const info = byId.get(id);
  if (info === undefined) throw new Error(`unknown ggml tensor type ${id}${where}`);
  if (info.blockSize === 0) {
    throw new Error(
      `unsupported ggml tensor type ${id} (${info.name})${where}: removed from ggml, re-quantize the model`,
    );
  }
  if (!info.supported) throw new Error(`unsupported ggml tensor type ${id} (${info.name})${where}`);
  return info as GgmlTypeInfo & { id: GgmlTypeId };
}

/** Bytes of `elementCount` elements of a type; the count must be whole blocks. */
export function ggmlByteLength(id: number, elementCount: number): number {
  const info = ggmlTypeInfo(id);
  if (elementCount % info.blockSize !== 0) {
    throw new Error(
      `${elementCount} elements is not a multiple of the ${info.name} block size ${info.blockSize}`,
    );
  }
  return (elementCount / info.blockSize) * info.typeSize;
}
