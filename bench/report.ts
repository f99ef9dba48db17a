/** Formats benchmark results as a Markdown table. */

export interface EngineResult {
  engine: string;
  threads: number;
  loadSeconds: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  prefillSeconds: number[];
  decodeSeconds: number[];
  /** Most CPU other processes used during any kept timed run (average CPUs; undefined off Linux). */
  worstForeignCpus?: number;
  /** Leading greedy ids identical to llama.cpp's at the same thread count. */
  agreesWithLlamaCpp?: number;
  notes: Record<string, unknown>;
  /** With --roofline: bytes a decode step reads, the bandwidth probed before each run, the share. */
  roofline?: { bytesPerToken: number; bandwidthBytesPerSecond: number; share: number };
}

function pad(cells: string[], widths: number[]): string {
  return `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
}

export function markdownTable(results: readonly EngineResult[], newTokens: number): string {
  const head = [
    "engine",
    "threads",
    "prefill tok/s",
    "decode tok/s",
    `greedy ids = llama.cpp (of ${newTokens + 1})`,
    "other load (CPUs)",
    ...(results.some((r) => r.roofline) ? ["roofline share (MB/token, GB/s)"] : []),
  ];
  const rows = results.map((r) => [
    r.engine,
    String(r.threads),
    r.prefillTokensPerSecond.toFixed(1),
    r.decodeTokensPerSecond.toFixed(1),
    r.agreesWithLlamaCpp === undefined ? "-" : String(r.agreesWithLlamaCpp),
    r.worstForeignCpus === undefined ? "-" : r.worstForeignCpus.toFixed(2),
    ...(results.some((x) => x.roofline)
      ? [
          r.roofline
            ? `${r.roofline.share.toFixed(2)} (${(r.roofline.bytesPerToken / 1e6).toFixed(0)}, ${(r.roofline.bandwidthBytesPerSecond / 1e9).toFixed(1)})`
            : "-",
        ]
      : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const rule = `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`;
  return [pad(head, widths), rule, ...rows.map((r) => pad(r, widths))].join("\n");
}
