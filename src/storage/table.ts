/** Plain-text tables for the `keys` and `usage` commands. */

/** Columns padded to their widest cell; `right` lists the columns to right-align (numbers). */
export function formatTable(
  headers: string[],
  rows: string[][],
  right: ReadonlySet<number> = new Set(),
): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join("\n")}\n`;
}
