/** A model's tensor types and how many tensors of each, e.g. "Q4_K 169, Q6_K 29, F32 141". */

import { ggmlTypeName } from "../gguf/ggml-types.ts";
import { openGguf } from "../gguf/reader.ts";
import { openSafetensors } from "../safetensors/reader.ts";

function describe(counts: Map<string, number>): string {
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([type, n]) => `${type} ${n}`)
    .join(", ");
}

function count(types: Iterable<string>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const t of types) counts.set(t, (counts.get(t) ?? 0) + 1);
  return counts;
}

export function ggufQuantMix(path: string): string {
  const file = openGguf(path);
  try {
    return describe(count(file.tensors.map((t) => ggmlTypeName(t.type))));
  } finally {
    file.close();
  }
}

export function safetensorsQuantMix(dir: string): string {
  const set = openSafetensors(dir);
  try {
    return describe(count(set.names().map((n) => set.tensor(n)!.dtype)));
  } finally {
    set.close();
  }
}
