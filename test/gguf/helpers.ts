/** Shared fixtures for the GGUF tests: temp dirs, a seeded PRNG and hand-encoded fp16 constants. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** fp16 bit patterns written out by hand, so block fixtures do not depend on the code under test. */
export const HALF = {
  "0": 0x0000,
  "0.125": 0x3000,
  "0.25": 0x3400,
  "0.5": 0x3800,
  "0.75": 0x3a00,
  "1": 0x3c00,
  "1.5": 0x3e00,
  "2": 0x4000,
  "3": 0x4200,
  "-0.5": 0xb800,
  "-1": 0xbc00,
  "-2": 0xc000,
} as const;

export function putHalf(bytes: Uint8Array, offset: number, key: keyof typeof HALF): void {
  bytes[offset] = HALF[key] & 0xff;
  bytes[offset + 1] = HALF[key] >> 8;
}

export function putU32(bytes: Uint8Array, offset: number, v: number): void {
  new DataView(bytes.buffer, bytes.byteOffset).setUint32(offset, v >>> 0, true);
}

/** Deterministic 32-bit generator (mulberry32) for reproducible "random" blocks. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a over the bytes: a compact fingerprint of a whole output array. */
export function fnv1a(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}

/** A fresh temp directory and its cleanup. */
export function tempDir(prefix = "gguf-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const SCALE_KEYS = ["0.125", "0.25", "0.5", "0.75", "1", "1.5", "-0.5", "-1"] as const;

/**
 * `nb` pseudo-random blocks of `typeSize` bytes with the fp16 scale fields at `scaleOffsets`
 * overwritten by ordinary values, so outputs stay finite (NaN bit patterns are not portable).
 */
export function randomBlocks(typeSize: number, scaleOffsets: number[], nb: number, seed: number): Uint8Array {
  const next = prng(seed);
  const bytes = new Uint8Array(typeSize * nb);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(next() * 256);
  for (let b = 0; b < nb; b++) {
    for (const o of scaleOffsets) putHalf(bytes, b * typeSize + o, SCALE_KEYS[Math.floor(next() * 8)]!);
  }
  return bytes;
}
