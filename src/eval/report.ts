/** An evaluation's report: a table of each checkpoint's metrics, and a chart of each metric against step. */
import { lineChart } from "../util/svg-chart.ts";
import { METRICS } from "./evaluate.ts";
import type { TargetSummary } from "./run.ts";

function present(summaries: readonly TargetSummary[]) {
  return METRICS.filter((m) => summaries.some((s) => s.metrics[m] !== undefined));
}

export function reportTable(summaries: readonly TargetSummary[]): string {
  const metrics = present(summaries);
  const rows = summaries.map((s) => [
    s.target.step === null ? "(base)" : String(s.target.step),
    s.target.name,
    String(s.items),
    ...metrics.map((m) => (s.metrics[m] === undefined ? "-" : s.metrics[m]!.toFixed(4))),
  ]);
  const header = ["step", "model", "items", ...metrics];
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** One series per metric over the checkpoints' steps; undefined when fewer than two steps. */
export function reportChart(summaries: readonly TargetSummary[], title: string): string | undefined {
  const stepped = summaries.filter((s) => s.target.step !== null);
  if (stepped.length < 2) return undefined;
  const series = present(stepped).map((m) => ({
    name: m,
    points: stepped
      .filter((s) => s.metrics[m] !== undefined)
      .map((s) => [s.target.step!, s.metrics[m]!] as [number, number]),
  }));
  return lineChart(series, { title, xLabel: "training step", yLabel: "score" });
}
