/** A small line chart as an SVG document: one polyline per series, labelled axes, a legend. */

export interface Series {
  name: string;
  points: [number, number][];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
}

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

function xmlText(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Round step for about five ticks over [0, max]. */
function tickStep(max: number): number {
  const raw = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
}

export function lineChart(series: readonly Series[], opts: ChartOptions): string {
  const width = opts.width ?? 560;
  const height = opts.height ?? 340;
  const margin = { left: 64, right: 20, top: 36, bottom: 48 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const all = series.flatMap((s) => s.points);
  const xMax = Math.max(...all.map((p) => p[0]), 1);
  const yMax = Math.max(...all.map((p) => p[1]), 1) * 1.1;
  const x = (v: number) => margin.left + (v / xMax) * plotW;
  const y = (v: number) => margin.top + plotH - (v / yMax) * plotH;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14">${xmlText(opts.title)}</text>`,
  ];
  const yStep = tickStep(yMax);
  for (let v = 0; v <= yMax; v += yStep) {
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${margin.left - 6}" y="${y(v) + 4}" text-anchor="end">${Number(v.toPrecision(6))}</text>`,
    );
  }
  const xs = [...new Set(all.map((p) => p[0]))].sort((a, b) => a - b);
  for (const v of xs)
    parts.push(`<text x="${x(v)}" y="${margin.top + plotH + 16}" text-anchor="middle">${v}</text>`);
  parts.push(
    `<line x1="${margin.left}" x2="${margin.left}" y1="${margin.top}" y2="${margin.top + plotH}" stroke="black"/>`,
    `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${margin.top + plotH}" y2="${margin.top + plotH}" stroke="black"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 10}" text-anchor="middle">${xmlText(opts.xLabel)}</text>`,
    `<text transform="translate(16 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">${xmlText(opts.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts}"/>`);
    for (const [px, py] of s.points)
      parts.push(`<circle cx="${x(px).toFixed(1)}" cy="${y(py).toFixed(1)}" r="3" fill="${color}"/>`);
    const ly = margin.top + 8 + i * 16;
    parts.push(
      `<line x1="${margin.left + 12}" x2="${margin.left + 32}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${margin.left + 38}" y="${ly + 4}">${xmlText(s.name)}</text>`,
    );
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}
