/**
 * GGUF data model shared by the reader, the writer and the converter.
 * Layout reference: ggml docs/gguf.md. Everything is little-endian.
 */

/** ggml tensor types by their on-disk id (ggml.h `enum ggml_type`). */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q8_1: 9,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  Q8_K: 15,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  BF16: 30,
} as const;
export type GgmlTypeId = (typeof GgmlType)[keyof typeof GgmlType];

/** Metadata value type ids (gguf.md `enum gguf_metadata_value_type`). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufValueTypeId = (typeof GgufValueType)[keyof typeof GgufValueType];

/**
 * A decoded metadata value. 64-bit integers become `number` when they fit in a double exactly,
 * `bigint` otherwise. Arrays (possibly nested) become JS arrays.
 */
export type GgufValue = number | bigint | boolean | string | GgufValue[];

/** A metadata entry as the writer needs it: the value plus its declared wire type. */
export interface GgufMetadataEntry {
  key: string;
  type: GgufValueTypeId;
  /** For ARRAY: the element type (nested arrays use ARRAY and `value` holds arrays). */
  arrayType?: GgufValueTypeId;
  /**
   * For arrays of arrays: the element types of the deeper levels, outermost first
   * (array<array<u32>> has arrayType ARRAY and nestedTypes [UINT32]).
   */
  nestedTypes?: GgufValueTypeId[];
  value: GgufValue;
}

export interface GgufTensorInfo {
  name: string;
  /** ggml order: dims[0] is the fastest-varying (for a 2-D weight: input features K). */
  dims: number[];
  type: GgmlTypeId;
  /** Absolute byte offset of the tensor's data in the file. */
  fileOffset: number;
  /** Bytes of quantized/raw data. */
  byteLength: number;
  elementCount: number;
}
