/**
 * Prefix cache: KV of prompt prefixes, in blocks of BLOCK tokens, keyed by a hash chain over the
 * salt and every token up to the block's end (so a block is only reused after the exact same
 * prefix, and different cache_salt values never share). Least recently used blocks are evicted
 * beyond the byte budget.
 */
import { createHash } from "node:crypto";
import type { KvBlock } from "../runner/kv-rows.ts";

export const PREFIX_BLOCK = 16;

export class PrefixCache {
  readonly budgetBytes: number;
  private readonly blocks = new Map<string, KvBlock>();
  private bytes = 0;

  constructor(budgetBytes: number) {
    this.budgetBytes = budgetBytes;
  }

  get usedBytes(): number {
    return this.bytes;
  }

  /** Hash-chain keys of the prompt's full blocks. */
  static blockKeys(tokens: readonly number[], salt = ""): string[] {
    const keys: string[] = [];
    let prev = `salt:${salt}`;
    for (let end = PREFIX_BLOCK; end <= tokens.length; end += PREFIX_BLOCK) {
      prev = createHash("sha256")
        .update(prev)
        .update(Int32Array.from(tokens.slice(end - PREFIX_BLOCK, end)))
        .digest("base64");
      keys.push(prev);
    }
    return keys;
  }

  /** The cached blocks that start the prompt, in order (refreshing their recency). */
  lookup(keys: readonly string[]): KvBlock[] {
    const hit: KvBlock[] = [];
    for (const key of keys) {
      const data = this.blocks.get(key);
      if (!data) break;
      this.blocks.delete(key);
      this.blocks.set(key, data);
      hit.push(data);
    }
    return hit;
  }

  has(key: string): boolean {
    return this.blocks.has(key);
  }

  /** Takes ownership of `block`: it is kept, or released at once, and released when evicted. */
  insert(key: string, block: KvBlock): void {
    if (this.blocks.has(key) || block.bytes > this.budgetBytes) {
      block.release();
      return;
    }
    this.blocks.set(key, block);
    this.bytes += block.bytes;
    for (const [oldest, value] of this.blocks) {
      if (this.bytes <= this.budgetBytes) break;
      this.blocks.delete(oldest);
      this.bytes -= value.bytes;
      value.release();
    }
  }
}
