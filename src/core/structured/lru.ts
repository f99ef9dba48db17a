/** A bounded least-recently-used map; evicted values go to `onEvict` (to free their memory). */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  private readonly capacity: number;
  private readonly onEvict: (value: V) => void;

  constructor(capacity: number, onEvict: (value: V) => void = () => {}) {
    this.capacity = Math.max(1, capacity);
    this.onEvict = onEvict;
  }

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v === undefined) return undefined;
    this.map.delete(key);
    this.map.set(key, v);
    return v;
  }

  set(key: K, value: V): void {
    const old = this.map.get(key);
    this.map.delete(key);
    if (old !== undefined && old !== value) this.onEvict(old);
    this.map.set(key, value);
    while (this.map.size > this.capacity) {
      const [k, v] = this.map.entries().next().value as [K, V];
      this.map.delete(k);
      this.onEvict(v);
    }
  }

  clear(): void {
    for (const v of this.map.values()) this.onEvict(v);
    this.map.clear();
  }
}
