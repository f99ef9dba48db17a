/**
 * Whose pages grew between two /proc/<pid>/smaps snapshots (the soak's `--smaps-dir` writes
 * them). Resident memory is grouped by what it belongs to: a file's mappings by path, [heap],
 * [stack], and anonymous memory by the 64 MiB-aligned window it lies in (glibc's malloc arenas
 * are 64 MiB-aligned 64 MiB regions, so each arena is one group; V8's heap pages and the KV
 * reservation span several). Prints the totals by kind, anonymous memory by mapping size (V8's
 * heap pages are 256 KiB mappings of their own) and the groups that moved most.
 *
 *   node bench/smaps-diff.ts BEFORE AFTER [--top 20]
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";

interface Mapping {
  start: number;
  end: number;
  path: string;
  rssKiB: number;
}

const ARENA_WINDOW = 64 * 1024 * 1024;

function readSmaps(file: string): Mapping[] {
  const maps: Mapping[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      maps.push({
        start: Number.parseInt(header[1]!, 16),
        end: Number.parseInt(header[2]!, 16),
        path: header[3]!.trim(),
        rssKiB: 0,
      });
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && maps.length > 0) maps.at(-1)!.rssKiB = Number(rss[1]);
  }
  return maps;
}

function kindOf(m: Mapping): string {
  if (m.path === "") return "anonymous";
  if (m.path.startsWith("[")) return m.path;
  return "files";
}

function groupOf(m: Mapping): string {
  if (m.path !== "") return m.path.startsWith("[") ? m.path : basename(m.path);
  const window = Math.floor(m.start / ARENA_WINDOW) * ARENA_WINDOW;
  return `anon @${window.toString(16)}`;
}

interface Group {
  rssKiB: number;
  sizeKiB: number;
  mappings: number;
}

function groups(maps: Mapping[], key: (m: Mapping) => string): Map<string, Group> {
  const out = new Map<string, Group>();
  for (const m of maps) {
    const k = key(m);
    const g = out.get(k) ?? { rssKiB: 0, sizeKiB: 0, mappings: 0 };
    g.rssKiB += m.rssKiB;
    g.sizeKiB += (m.end - m.start) / 1024;
    g.mappings += 1;
    out.set(k, g);
  }
  return out;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: "string", default: "20" } },
});
if (positionals.length !== 2) {
  console.error("usage: node bench/smaps-diff.ts BEFORE AFTER [--top 20]");
  process.exit(2);
}
const [before, after] = positionals.map(readSmaps) as [Mapping[], Mapping[]];
const MiB = (kib: number) => (kib / 1024).toFixed(1).padStart(8);
const empty: Group = { rssKiB: 0, sizeKiB: 0, mappings: 0 };

function table(title: string, key: (m: Mapping) => string, top: number): void {
  const a = groups(before, key);
  const b = groups(after, key);
  const rows = [...new Set([...a.keys(), ...b.keys()])].map((k) => {
    const x = a.get(k) ?? empty;
    const y = b.get(k) ?? empty;
    return { k, x, y, delta: y.rssKiB - x.rssKiB };
  });
  rows.sort((p, q) => Math.abs(q.delta) - Math.abs(p.delta));
  console.log(`\n${title} (resident MiB: before, after, change; mapped MiB after; mappings after)`);
  for (const r of rows.slice(0, top))
    console.log(
      `${r.k.padEnd(40)} ${MiB(r.x.rssKiB)} ${MiB(r.y.rssKiB)} ${MiB(r.delta)} ${MiB(r.y.sizeKiB)} ${String(r.y.mappings).padStart(6)}`,
    );
  const total = (g: Map<string, Group>) => [...g.values()].reduce((s, v) => s + v.rssKiB, 0);
  console.log(`${"total".padEnd(40)} ${MiB(total(a))} ${MiB(total(b))} ${MiB(total(b) - total(a))}`);
}

table("by kind", kindOf, 10);
table(
  "anonymous, by mapping size",
  (m) => (m.path === "" ? `anon mappings of ${(m.end - m.start) / 1024} KiB` : "not anonymous"),
  12,
);
table("by group", groupOf, Number(values.top));
